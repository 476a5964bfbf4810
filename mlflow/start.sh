#!/usr/bin/env bash
# The MLflow tracking server of the local stack (`make serve` runs it; flows/serve.py): a SQLite backend store and
# artifacts proxied to S3, so clients need only MLFLOW_TRACKING_URI (the server reads and writes the bucket).
#
# Settings, from the environment:
#   MLFLOW_BACKEND_STORE_URI      e.g. sqlite:///.prefect/serve/mlflow.db              (required)
#   MLFLOW_ARTIFACTS_DESTINATION  e.g. s3://hpcrl-mlflow                               (required)
#   MLFLOW_S3_ENDPOINT_URL        the S3 server, e.g. http://127.0.0.1:9000 (unset: AWS itself)
#   AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY                                            (for S3)
#   MLFLOW_HOST (127.0.0.1), MLFLOW_PORT (5000), MLFLOW_WORKERS (1), MLFLOW_BIN (mlflow on PATH)
set -euo pipefail

: "${MLFLOW_BACKEND_STORE_URI:?set MLFLOW_BACKEND_STORE_URI, e.g. sqlite:///mlflow-server.db}"
: "${MLFLOW_ARTIFACTS_DESTINATION:?set MLFLOW_ARTIFACTS_DESTINATION, e.g. s3://hpcrl-mlflow}"
if [[ "$MLFLOW_ARTIFACTS_DESTINATION" == s3://* && -z "${AWS_ACCESS_KEY_ID:-}" ]]; then
  echo "mlflow/start.sh: artifacts go to $MLFLOW_ARTIFACTS_DESTINATION but AWS_ACCESS_KEY_ID is not set" >&2
  exit 2
fi
export MLFLOW_DISABLE_TELEMETRY=true DO_NOT_TRACK=true

exec "${MLFLOW_BIN:-mlflow}" server \
  --backend-store-uri "$MLFLOW_BACKEND_STORE_URI" \
  --artifacts-destination "$MLFLOW_ARTIFACTS_DESTINATION" \
  --host "${MLFLOW_HOST:-127.0.0.1}" \
  --port "${MLFLOW_PORT:-5000}" \
  --workers "${MLFLOW_WORKERS:-1}"
