# faultline in a slim image: the same package, from the same lock file, as the README.
#   docker build -t faultline . && docker run --rm faultline            # runs the demo
#   docker run --rm -v /logs:/corpus -v $PWD:/out faultline \
#       faultline ingest /corpus --db /out/faultline.duckdb
FROM python:3.11-slim

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

WORKDIR /src
COPY constraints.txt pyproject.toml README.md ./
COPY faultline ./faultline
COPY pipeline ./pipeline
COPY classifiers ./classifiers
COPY schemas ./schemas
COPY fixtures ./fixtures
RUN pip install --no-cache-dir -c constraints.txt . \
    && useradd --create-home --uid 10001 faultline

USER 10001
WORKDIR /home/faultline
CMD ["faultline", "demo"]
