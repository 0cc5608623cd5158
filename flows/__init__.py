"""Entry points: the Prefect flows and the `gpuledger` command line."""

import logging
import os

# Prefect offline and quiet (measured in shared FIELD_NOTES): its ephemeral
# server needs more than the default 20 s to start on a 2-core machine, and
# analytics would try to reach the internet. Users' own settings win.
ENV_DEFAULTS = {
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "1",
    "PREFECT_SERVER_UI_ENABLED": "false",
    "PREFECT_LOGGING_LEVEL": "WARNING",
    "AWS_EC2_METADATA_DISABLED": "true",
}
# The names set here, not by the user: a command may choose otherwise for them (`serve` logs runs).
DEFAULTED = {name for name in ENV_DEFAULTS if name not in os.environ}
os.environ.update({name: ENV_DEFAULTS[name] for name in DEFAULTED})

# Prefect lends its handlers to the loggers named in PREFECT_LOGGING_EXTRA_LOGGERS, not its level:
# named there, gpuledger's messages log at PREFECT_LOGGING_LEVEL, so a served or worker-run
# refresh shows them with Prefect's own.
if "gpuledger" in os.environ.get("PREFECT_LOGGING_EXTRA_LOGGERS", "").split(","):
    logging.getLogger("gpuledger").setLevel(os.environ.get("PREFECT_LOGGING_LEVEL", "INFO").upper())
