"""The stock ``openai`` package against a real ``kairox serve``: no header, no ``user``,
no code of Kairox's; a chat UI's whole-conversation requests keep one session each."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import openai
import pytest

from kairox_core.attachments import MAX_BYTES
from kairox_core.testing.files import BROKEN_PDF, PNG, ZIP, encrypted_pdf, pdf_with
from kairox_core.testing.serve import Server

HELIX = "Hello! I will keep that in mind."


def client(serve: Server) -> openai.OpenAI:
    # the SDK refuses to start without a key; Kairox without --token ignores it
    return openai.OpenAI(base_url=f"{serve.url}/v1", api_key="unused", max_retries=0)


def user_turns(serve: Server, sid: str) -> list[str]:
    messages = serve.api("GET", f"/api/sessions/{sid}/messages")
    return [m["payload"]["text"] for m in messages if m["type"] == "UserMessageAdded"]


def test_models_lists_the_profiles(serve: Server) -> None:
    models = client(serve).models.list()
    assert [m.id for m in models.data] == ["default", "kairox"]
    assert all(m.object == "model" and m.owned_by == "kairox" for m in models.data)
    assert client(serve).models.retrieve("default").id == "default"
    with pytest.raises(openai.NotFoundError) as info:
        client(serve).models.retrieve("gpt-9")
    assert "does not exist here" in info.value.message and "default" in info.value.message


def test_a_chat_ui_conversation_keeps_one_session(serve: Server) -> None:
    oa = client(serve)
    system = {"role": "system", "content": "Answer like a pirate."}
    history: list[Any] = [system, {"role": "user", "content": "I use helix"}]
    first = oa.chat.completions.create(model="default", messages=history)
    assert first.choices[0].message.content.rstrip() == HELIX
    assert first.model == "default"
    sid = first.model_extra["kairox"]["session_id"]
    assert sid.startswith("oai-")
    # a chat UI resends the whole conversation each turn: the same session continues
    history += [
        {"role": "assistant", "content": first.choices[0].message.content},
        {"role": "user", "content": "and now?"},
    ]
    second = oa.chat.completions.create(model="kairox", messages=history)
    assert second.model_extra["kairox"]["session_id"] == sid
    assert user_turns(serve, sid) == ["I use helix", "and now?"]  # not replayed
    # another conversation (another opening) is another session
    other = oa.chat.completions.create(
        model="default", messages=[system, {"role": "user", "content": "hi"}]
    )
    assert other.model_extra["kairox"]["session_id"] not in (sid, "")
    # the client's system message was sent as instructions, and the trace says so
    notes = second.model_extra["kairox"]["trace"]["layers"]["system"]["notes"]
    assert any("instructions from the caller" in n and "pirate" in n for n in notes)


def test_streaming_loop(serve: Server) -> None:
    oa = client(serve)
    messages: Any = [
        {"role": "system", "content": "Answer like a pirate."},
        {"role": "user", "content": "I use helix"},
    ]
    pieces, extra = [], None
    for chunk in oa.chat.completions.create(model="default", messages=messages, stream=True):
        if chunk.choices and chunk.choices[0].delta.content:
            pieces.append(chunk.choices[0].delta.content)
        extra = (chunk.model_extra or {}).get("kairox") or extra
    assert len(pieces) > 1 and "".join(pieces).rstrip() == HELIX
    assert extra is not None and extra["proposals"][0]["body"] == "prefers helix"
    notes = extra["trace"]["layers"]["system"]["notes"]
    assert any("instructions from the caller" in n for n in notes)
    # a plain HTTP streaming loop with the same opening: the same session
    sid = extra["session_id"]
    with httpx.stream(
        "POST",
        f"{serve.url}/v1/chat/completions",
        json={"messages": messages, "stream": True},
        timeout=30,
    ) as r:
        assert r.status_code == 200
        list(r.iter_lines())
    assert user_turns(serve, sid) == ["I use helix", "I use helix"]


def test_errors_come_in_openais_shape(serve: Server) -> None:
    oa = client(serve)
    with pytest.raises(openai.BadRequestError) as bad:
        oa.chat.completions.create(model="default", messages=[])
    assert "messages" in bad.value.message
    assert bad.value.body is not None and bad.value.body["param"] == "messages"
    with pytest.raises(openai.NotFoundError) as missing:
        oa.chat.completions.create(model="gpt-9", messages=[{"role": "user", "content": "x"}])
    assert missing.value.code == "model_not_found"
    with pytest.raises(openai.BadRequestError) as empty:
        oa.chat.completions.create(model="default", messages=[{"role": "system", "content": "s"}])
    assert "no user message" in empty.value.message
    # the guard's refusals too (a form post is not JSON)
    r = httpx.post(
        f"{serve.url}/v1/chat/completions", content=b"x", headers={"Content-Type": "text/plain"}
    )
    assert r.status_code == 415
    error = r.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"]
    # other routes keep FastAPI's shape
    assert "detail" in httpx.get(f"{serve.url}/api/sessions/nope/messages").json()


def test_a_system_message_too_big_for_the_budget_is_context_length_exceeded(
    serve: Server,
) -> None:
    huge = "pirate " * 20_000  # 20,000 tokens; the default window holds 8,192
    with pytest.raises(openai.BadRequestError) as info:
        client(serve).chat.completions.create(
            model="default",
            messages=[{"role": "system", "content": huge}, {"role": "user", "content": "hi"}],
        )
    assert info.value.code == "context_length_exceeded"


def attachments_of_turn(serve: Server, sid: str) -> list[dict[str, Any]]:
    messages = serve.api("GET", f"/api/sessions/{sid}/messages")
    (asked,) = [m for m in messages if m["type"] == "UserMessageAdded"]
    return list(asked["payload"]["attachments"])


def test_image_and_file_parts_are_the_turns_attachments(serve: Server) -> None:
    png = base64.b64encode(PNG).decode()
    pdf = base64.b64encode(pdf_with(["Revenue rose 12 percent", "Costs fell"])).decode()
    reply = client(serve).chat.completions.create(
        model="default",
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "what do these say?"},
                    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png}"}},
                    {
                        "type": "file",
                        "file": {
                            "filename": "report.pdf",
                            "file_data": f"data:application/pdf;base64,{pdf}",
                        },
                    },
                ],
            }
        ],
    )
    sid = reply.model_extra["kairox"]["session_id"]
    assert user_turns(serve, sid) == ["what do these say?"]
    image, report = attachments_of_turn(serve, sid)
    assert (image["kind"], image["filename"], image["data"]) == ("image", "image-1.png", png)
    assert (report["kind"], report["filename"], report["pages"]) == ("document", "report.pdf", 2)
    assert report["text"] == "Revenue rose 12 percent\n\nCosts fell"


def bad_part(serve: Server, part: dict[str, Any]) -> openai.BadRequestError:
    messages: Any = [{"role": "user", "content": [{"type": "text", "text": "read this"}, part]}]
    with pytest.raises(openai.BadRequestError) as info:
        client(serve).chat.completions.create(model="default", messages=messages)
    return info.value


def file_part(name: str, data: bytes) -> dict[str, Any]:
    encoded = base64.b64encode(data).decode()
    return {"type": "file", "file": {"filename": name, "file_data": encoded}}


def test_parts_kairox_cannot_take_are_clear_400s(serve: Server) -> None:
    remote = bad_part(
        serve, {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}
    )
    assert "never downloads" in remote.message and "data:" in remote.message
    assert (
        remote.body is not None and remote.body["param"] == "messages[0].content[1].image_url.url"
    )
    audio = bad_part(serve, {"type": "input_audio", "input_audio": {"data": "", "format": "wav"}})
    assert "'input_audio', which Kairox does not read" in audio.message
    assert audio.body is not None and audio.body["param"] == "messages[0].content[1].type"
    locked = bad_part(serve, file_part("locked.pdf", encrypted_pdf()))
    assert "locked.pdf: the PDF is encrypted" in locked.message
    broken = bad_part(serve, file_part("broken.pdf", BROKEN_PDF))
    assert "the PDF cannot be read" in broken.message
    unknown = bad_part(serve, file_part("archive.zip", ZIP))
    assert "not a type Kairox reads" in unknown.message
    big = bad_part(serve, file_part("big.txt", b"x" * (MAX_BYTES + 1)))
    assert "over the limit of" in big.message
    by_id = bad_part(serve, {"type": "file", "file": {"file_id": "file-abc"}})
    assert "no Files API" in by_id.message
    assert serve.api("GET", "/api/sessions") == []  # no turn ran, no session was made


def test_serves_default_body_limit_fits_the_largest_attachment() -> None:
    from kairox_core.cli.serve_cmd import serve_command
    from kairox_core.web.security import DEFAULT_MAX_BODY

    (option,) = [p for p in serve_command.params if p.name == "max_body"]
    assert option.default == DEFAULT_MAX_BODY
    assert len(base64.b64encode(bytes(MAX_BYTES + 1))) + 1024 <= DEFAULT_MAX_BODY
