"""multiverse: run generative-AI audits as a multiverse of measurement choices."""

import os as _os

# litellm fetches a remote price map at import unless told not to; importing
# multiverse must never touch the network.
_os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

__version__ = "0.1.0"
