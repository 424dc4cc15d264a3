# The grading service's image: the autograder image (docker/Dockerfile: the
# project built, its references, the sandbox users) with the service's
# packages added. The gateway (`tilelab serve`) and the workers
# (`tilelab worker --gpu N`) run from it; docker/compose.yaml starts both.
#
#   docker build -f docker/Dockerfile -t tilelab-autograder build/autograder
#   docker build -f docker/service.Dockerfile -t tilelab-service build/autograder
# The image docker/Dockerfile built (another tag: --build-arg AUTOGRADER=...).
ARG AUTOGRADER=tilelab-autograder:latest
FROM ${AUTOGRADER}

# The service extra of grader/pyproject.toml, into the grader's own venv.
RUN /autograder/source/.venv/bin/python -m pip install --no-cache-dir \
      "procrastinate>=3.0" "psycopg[binary,pool]>=3.1" "fastapi>=0.110" "uvicorn>=0.29"

EXPOSE 8408
ENTRYPOINT ["/autograder/source/.venv/bin/tilelab"]
CMD ["serve", "--host", "0.0.0.0"]
