"""The HTTP server every local stand-in (OpenAI, Bedrock, Pinecone, Weaviate) runs on."""

from __future__ import annotations

import sys
from http.server import ThreadingHTTPServer
from typing import Any


class QuietHTTPServer(ThreadingHTTPServer):
    """A client dropping its kept-alive connection (the process ending, a pool closing)
    is normal, not an error: socketserver would print its traceback to stderr, which
    the README examples' tests read as something failing quietly (a CI flake). Any
    other error in a handler is still printed."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):  # reset, broken pipe, aborted
            return
        super().handle_error(request, client_address)
