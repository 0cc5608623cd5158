"""Entry points: the Prefect flows and the `gpuledger` command line."""

import os

# Prefect offline and quiet (measured in shared FIELD_NOTES): its ephemeral
# server needs more than the default 20 s to start on a 2-core machine, and
# analytics would try to reach the internet. Users' own settings win.
for _name, _value in {
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "1",
    "PREFECT_SERVER_UI_ENABLED": "false",
    "PREFECT_LOGGING_LEVEL": "WARNING",
    "AWS_EC2_METADATA_DISABLED": "true",
}.items():
    os.environ.setdefault(_name, _value)
