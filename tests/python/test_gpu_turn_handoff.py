"""The GPU's timing turn handed on from one grading to the next
(system/gpu_lock.py): other gradings' cases and sanitizers wait meanwhile,
the grading that holds it runs its own, and a few turns in a row at most."""

import threading
import time

from tilelab.system.gpu_lock import HANDOFFS_IN_A_ROW, GpuLock


def _started(target, *args) -> threading.Thread:
    thread = threading.Thread(target=target, args=args, daemon=True)
    thread.start()
    return thread


def _cases_of(lock: GpuLock, grading: str, events: list) -> None:
    """A grading's cases and sanitizers, on the shared GPU."""
    with lock.shared(cases_of=grading):
        events.append(f"{grading} cases")


def test_a_turn_given_back_while_a_grading_waits_keeps_other_cases_out_until_that_grading_is_done():
    lock, events = GpuLock(), []
    a_holds, b_waits = threading.Event(), threading.Event()

    def grading_a():
        with lock.turn(owner="a"):
            a_holds.set()
            b_waits.wait(5)
            time.sleep(0.1)  # b is blocked on the turn by now
            events.append("a turn over")

    def grading_b():
        b_waits.set()
        with lock.turn(owner="b"):
            events.append("b turn")
            time.sleep(0.1)  # c's cases ask to share now, and wait
            with lock.shared(cases_of="b"):  # b's own cases are not kept out by its own turn
                events.append("b cases")
            with lock.exclusive():  # nothing of c's started, so nothing to wait for
                events.append("b timed")
            events.append("b turn over")

    a = _started(grading_a)
    assert a_holds.wait(5)
    b = _started(grading_b)
    a.join(5)
    time.sleep(0.02)  # a gave the turn back with b waiting: handed on
    c = _started(_cases_of, lock, "c", events)
    for thread in (b, c):
        thread.join(5)
    assert events == ["a turn over", "b turn", "b cases", "b timed", "b turn over", "c cases"]


def test_cases_that_wait_go_first_after_a_few_turns_handed_on_in_a_row():
    lock, events = GpuLock(), []
    first_holds, go = threading.Event(), threading.Event()
    waiting = HANDOFFS_IN_A_ROW + 2

    def first():
        with lock.turn(owner="first"):
            first_holds.set()
            go.wait(5)
            events.append("turn over")

    def another(name):
        with lock.turn(owner=name):
            time.sleep(0.1)
            events.append("turn over")

    holder = _started(first)
    assert first_holds.wait(5)
    others = [_started(another, f"grading {i}") for i in range(waiting)]
    time.sleep(0.1)  # every other grading waits for the turn
    go.set()
    holder.join(5)
    time.sleep(0.02)
    waiter = _started(_cases_of, lock, "c", events)
    for thread in [*others, waiter]:
        thread.join(10)
    assert len(events) == waiting + 2
    # The first turn, then HANDOFFS_IN_A_ROW handed on while the cases waited; they start during the next.
    assert events.index("c cases") == 1 + HANDOFFS_IN_A_ROW


def test_a_turn_given_back_with_nobody_waiting_keeps_no_cases_out():
    lock, events = GpuLock(), []
    with lock.turn(owner="a"):
        events.append("a turn")
    _started(_cases_of, lock, "b", events).join(2)
    assert events == ["a turn", "b cases"]
