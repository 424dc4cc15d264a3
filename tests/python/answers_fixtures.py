"""What the answers tests share (their fixtures questions, key and grade are
conftest.py's)."""

# assignment.yaml: 34 number and choice questions of 1 point each (the 26 of
# the textbook chapters, 3 on the traffic figures of the report and 5 on
# register and warp tiling), and 2 text questions worth 3 points to a TA.
AUTOMATIC_POINTS = 34


def by_id(result) -> dict:
    return {q.id: q for q in result.questions}


def auto_ids(questions) -> list:
    return [q.id for q in questions if q.kind != "text"]
