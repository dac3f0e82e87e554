"""An incremental decoder for Server-Sent Events, as OpenAI-compatible servers stream them.

Fed text in arbitrary pieces, it returns the ``data`` payload of every completed event
(lines ``data: ...`` joined by newlines, events ended by a blank line), per the
WHATWG EventSource rules: ``\\r\\n``, ``\\r`` and ``\\n`` all end a line, one space after
the colon is dropped, comment lines (``:``) and other fields are ignored. Some servers
omit the blank line before ``[DONE]`` or the final event; ``finish`` flushes it.
"""

from __future__ import annotations


class SseDecoder:
    def __init__(self) -> None:
        self._buffer = ""
        self._data: list[str] = []
        self._pending_cr = False

    def feed(self, text: str) -> list[str]:
        """Add text; return the data of every event completed by it."""
        if not text:
            return []
        if self._pending_cr and text.startswith("\n"):
            text = text[1:]  # the \n of a \r\n split across two pieces
        self._pending_cr = False
        events: list[str] = []
        buffer = self._buffer + text
        start = 0
        i = 0
        n = len(buffer)
        while i < n:
            ch = buffer[i]
            if ch == "\r" or ch == "\n":
                self._line(buffer[start:i], events)
                if ch == "\r":
                    if i + 1 < n:
                        if buffer[i + 1] == "\n":
                            i += 1
                    else:
                        self._pending_cr = True
                start = i + 1
            i += 1
        self._buffer = buffer[start:]
        return events

    def finish(self) -> list[str]:
        """End of stream: an unterminated last line and event still count."""
        events: list[str] = []
        if self._buffer:
            self._line(self._buffer, events)
            self._buffer = ""
        if self._data:
            events.append("\n".join(self._data))
            self._data = []
        return events

    def _line(self, line: str, events: list[str]) -> None:
        if not line:
            if self._data:
                events.append("\n".join(self._data))
                self._data = []
            return
        if line.startswith(":"):
            return
        field, _, value = line.partition(":")
        if field == "data":
            self._data.append(value[1:] if value.startswith(" ") else value)
