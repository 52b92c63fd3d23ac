"""A hand-written corpus of malformed requests: every one is answered (never 5xx, never a hang) in vLLM's envelope.

Truncated and broken multipart, wrong types, huge / negative / NaN / infinite numbers, non-UTF-8 bytes,
corrupt media (a PNG header then garbage, a truncated MP4, a decompression bomb), empty files, JSON
nesting bombs, duplicated fields, wrong content types, hostile job ids and local paths. Bodies are
built by hand so the bytes on the wire are exactly the malformed ones.
"""

from __future__ import annotations

import io
import json
import struct
import zlib

import httpx
import numpy as np
import pytest

from cosmos_helpers import media

BOUNDARY = "cosmosfuzzboundary"
MAX_FIELD = 64 * 1024
MAX_BODY = 2 * 1024 * 1024
OK_FIELDS = {"prompt": "a robot", "size": "32x32", "num_frames": "5", "num_inference_steps": "1", "seed": "1"}
RESULTS: list[tuple[str, int]] = []


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from cosmos_helpers.standins.vllm_omni.local import ThreadedServer

    from .doubles import InstantBackend

    storage = tmp_path_factory.mktemp("malformed")
    with ThreadedServer(InstantBackend(), storage_dir=storage, sync_timeout=60,
                        max_field_bytes=MAX_FIELD, max_request_bytes=MAX_BODY, max_image_pixels=256 * 256,
                        max_video_frames=20, max_output_pixels=64 * 64, max_output_frames=17, max_json_depth=16,
                        max_prompt_chars=2000) as running:
        running.storage = storage
        yield running
    print(f"\nmalformed corpus: {len(RESULTS)} inputs, statuses "
          f"{dict(sorted(_count(status for _, status in RESULTS).items()))}")


def _count(values):
    out: dict = {}
    for value in values:
        out[value] = out.get(value, 0) + 1
    return out


def part(name: bytes | str, value: bytes | str, filename: str | None = None, content_type: str | None = None) -> bytes:
    name = name.encode() if isinstance(name, str) else name
    value = value.encode() if isinstance(value, str) else value
    disposition = b'Content-Disposition: form-data; name="' + name + b'"'
    if filename is not None:
        disposition += f'; filename="{filename}"'.encode()
    head = b"--" + BOUNDARY.encode() + b"\r\n" + disposition + b"\r\n"
    if content_type:
        head += f"Content-Type: {content_type}\r\n".encode()
    return head + b"\r\n" + value + b"\r\n"


def body(*parts: bytes, close: bool = True) -> bytes:
    return b"".join(parts) + (b"--" + BOUNDARY.encode() + b"--\r\n" if close else b"")


def fields(**overrides) -> list[bytes]:
    values = {**OK_FIELDS, **overrides}
    return [part(k, v) for k, v in values.items() if v is not None]


MULTIPART = {"content-type": f"multipart/form-data; boundary={BOUNDARY}"}


def png(width: int, height: int) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray((np.random.default_rng(0).random((height, width, 3)) * 255).astype(np.uint8)).save(buffer, "PNG")
    return buffer.getvalue()


def png_bomb(width: int = 100_000, height: int = 100_000) -> bytes:
    """A valid PNG header claiming 10^10 pixels, with a tiny IDAT: decoding it would need ~30 GB."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\x00" * 1024)) + \
        chunk(b"IEND", b"")


@pytest.fixture(scope="module")
def mp4(tmp_path_factory) -> bytes:
    path = tmp_path_factory.mktemp("mp4") / "clip.mp4"
    media.write_mp4(path, (np.random.default_rng(1).random((9, 32, 32, 3)) * 255).astype(np.uint8), 24)
    return path.read_bytes()


@pytest.fixture(scope="module")
def long_mp4(tmp_path_factory) -> bytes:
    path = tmp_path_factory.mktemp("mp4") / "long.mp4"
    media.write_mp4(path, np.zeros((33, 16, 16, 3), dtype=np.uint8), 24)
    return path.read_bytes()


def corpus(mp4: bytes, long_mp4: bytes) -> list[tuple[str, str, str, dict, set[int]]]:
    """(name, method, path, httpx kwargs, acceptable statuses)."""
    v, img = "/v1/videos/sync", "/v1/images/generations"
    bad = {400}
    cases: list[tuple[str, str, str, dict, set[int]]] = []

    def video(name: str, raw: bytes, expect: set[int] = bad, route: str = v, headers: dict | None = None):
        cases.append((name, "POST", route, dict(content=raw, headers=headers or MULTIPART), expect))

    # multipart structure
    whole = body(*fields())
    video("truncated multipart (cut mid-part)", whole[: len(whole) // 2], {200, 400})  # complete parts count
    video("truncated multipart (no closing boundary)", body(*fields(), close=False), {200, 400})
    video("no boundary parameter", whole, bad, headers={"content-type": "multipart/form-data"})
    video("wrong boundary", whole, bad, headers={"content-type": "multipart/form-data; boundary=other"})
    video("empty body", b"")
    video("garbage body", bytes(range(256)) * 8)
    video("part without a name", b"--" + BOUNDARY.encode() + b"\r\nContent-Disposition: form-data\r\n\r\nx\r\n"
          + body(*fields()))
    video("part without headers", b"--" + BOUNDARY.encode() + b"\r\n\r\nx\r\n" + body(*fields()))
    video("too many fields", body(*fields(), *[part(f"f{i}", "x") for i in range(300)]))
    video("too many files", body(*fields(), *[part(f"file{i}", b"x", "x.bin") for i in range(12)]))
    video("field over the per-field limit", body(*fields(negative_prompt="n" * (MAX_FIELD + 10))))  # Starlette's 400
    video("body over the request limit (Content-Length)", body(*fields(), part("input_reference", b"\0" * MAX_BODY,
                                                                               "big.mp4")), {413})
    # encodings
    video("non-UTF-8 prompt", body(*fields(prompt=b"\xff\xfe\xfa robot \xc3\x28")), {200, 400})
    video("non-UTF-8 field name", body(*fields(), part(b"\xff\xfename", "x")), {200, 400})
    video("NUL in prompt", body(*fields(prompt="a\x00robot")), {200})  # text, as vLLM-Omni takes it
    video("non-UTF-8 extra_params", body(*fields(extra_params=b'{"guardrails": \xff}')))
    video("UTF-16 extra_params", body(*fields(extra_params='{"guardrails": false}'.encode("utf-16"))))
    # duplicated fields: the last one counts (FastAPI's form parsing, so vLLM-Omni's too)
    video("prompt twice", body(*fields(), part("prompt", "second")), {200})
    video("num_frames twice, second bad", body(*fields(), part("num_frames", "nope")))
    video("num_frames twice, first bad", body(part("num_frames", "nope"), *fields()), {200})
    video("input_reference twice, second junk", body(*fields(), part("input_reference", png(32, 32), "a.png"),
                                                     part("input_reference", b"junk", "b.png")))
    video("input_reference twice, first junk", body(*fields(), part("input_reference", b"junk", "b.png"),
                                                    part("input_reference", png(32, 32), "a.png")), {200})
    # wrong types, huge / negative / non-finite numbers
    for name, value in [("num_frames", "abc"), ("num_frames", "-5"), ("num_frames", "1" * 5000),
                        ("num_frames", "99999999999999999999"), ("num_frames", "5.5"), ("fps", "NaN"), ("fps", "inf"),
                        ("fps", "-inf"), ("fps", "1e309"), ("fps", "0"), ("guidance_scale", "nan"),
                        ("guidance_scale", "-0.1"), ("num_inference_steps", "0"), ("num_inference_steps", "1e3"),
                        ("seed", "1e10"), ("seed", str(2**64)), ("seed", "9" * 5000), ("width", "-16"),
                        ("size", "0x0"), ("size", "99999999x99999999"), ("size", "32x32x32"), ("size", "３２x32"),
                        ("seconds", "9999999999999999"), ("seconds", "1" * 5000), ("sound_duration", "-1"),
                        ("sound_duration", "nan"), ("generate_sound", "2"), ("quality", "best"),
                        ("flow_shift", "inf"), ("flow_shift", "1e400")]:
        changes = {name: value}
        if name == "seconds":
            changes["num_frames"] = None
        if name == "width":
            changes.update(size=None, height="32")
        # full-width digits are digits to Python (and pydantic): "３２x32" is a valid 32x32
        video(f"{name}={value[:24]}", body(*fields(**changes)), {200, 400} if value.startswith("３") else bad)
    video("seconds x fps too many frames", body(*fields(num_frames=None, seconds="100000", fps="100")))
    # extra_params JSON
    for label, raw in [("deep list nesting", "[" * 20_000 + "]" * 20_000),
                       ("deep object nesting", '{"a":' * 50 + "1" + "}" * 50),
                       ("unclosed nesting", "{" * 30_000),
                       ("JSON array", "[1,2]"), ("JSON string", '"x"'), ("JSON null", "null"),
                       ("NaN control_weight", '{"edge": {"control_weight": NaN}}'),
                       ("Infinity flow_shift", '{"flow_shift": Infinity}'),
                       ("huge max_sequence_length", '{"max_sequence_length": 1e400}'),
                       ("bad condition frames", '{"condition_frame_indexes_vision": [1.5, "a"]}'),
                       ("hint path outside", '{"edge": "/etc/passwd"}'),
                       ("hint control_path traversal", '{"edge": {"control_path": "../../../../etc/shadow"}}'),
                       ("hint control_path not a string", '{"edge": {"control_path": {"x": 1}}}'),
                       ("action keys", '{"action_mode": "policy"}')]:
        video(f"extra_params: {label}", body(*fields(extra_params=raw)), bad)
    video("prompt nesting bomb", body(*fields(prompt='{"a":' * 10_000 + "1" + "}" * 10_000)))
    video("prompt over the length limit", body(*fields(prompt="x" * 3000)))
    video("prompt names a server file", body(*fields(prompt="/etc/hostname.txt")), {200})  # text, never read
    video("negative prompt names a server file", body(*fields(negative_prompt="../../secrets.json")), {200})
    video("lora not an object", body(*fields(lora="[]")))
    # corrupt media
    for label, content in [("PNG header then garbage", b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4),
                           ("truncated MP4", mp4[: len(mp4) // 2]), ("MP4 head only", mp4[:64]),
                           ("JPEG header only", b"\xff\xd8\xff\xe0\x00\x10JFIF\x00"),
                           ("GIF header only", b"GIF89a\x01\x00\x01\x00"), ("text as .mp4", b"hello world" * 20),
                           ("PNG decompression bomb", png_bomb()), ("image above the pixel limit", png(300, 300)),
                           ("video with too many frames", long_mp4)]:
        video(f"input_reference: {label}", body(*fields(), part("input_reference", content, "x.mp4", "video/mp4")))
    video("input_reference: empty file", body(*fields(), part("input_reference", b"", "empty.png")))
    video("control_reference corrupt", body(*fields(control_type="edge"), part("control_reference", b"junk", "c.mp4")))
    video("control_type unknown", body(*fields(control_type="normals"), part("control_reference", mp4, "c.mp4")))
    # references
    for label, raw in [("file URL", {"image_url": "file:///etc/passwd"}),
                       ("file URL traversal", {"image_url": "file:///tmp/../etc/hostname"}),
                       ("bad base64", {"image_url": "data:image/png;base64,@@@@"}),
                       ("data URL garbage", {"image_url": "data:image/png;base64,AAAAAAAA"}),
                       ("data URL without comma", {"image_url": "data:image/png"}),
                       ("unreachable host", {"image_url": "http://127.0.0.1:9/x.png"}),
                       ("ftp URL", {"image_url": "ftp://example.invalid/x.png"}),
                       ("url not a string", {"image_url": 123}), ("file_id", {"file_id": "f"})]:
        video(f"image_reference: {label}", body(*fields(image_reference=json.dumps(raw))))
    video("image_reference not JSON", body(*fields(image_reference="{")))
    video("video_reference file URL", body(*fields(video_reference=json.dumps({"video_url": "file:///etc/passwd"}))))
    # wrong content types
    video("video route with JSON", json.dumps(OK_FIELDS).encode(), headers={"content-type": "application/json"})
    video("video route with text/plain", b"prompt=x", headers={"content-type": "text/plain"})
    video("video route without content type", whole, headers={"content-type": ""})
    video("url-encoded form", b"prompt=a+robot&size=32x32&num_frames=5&num_inference_steps=1", {200},
          headers={"content-type": "application/x-www-form-urlencoded"})
    video("async route, truncated multipart", whole[:100], route="/v1/videos")
    video("async route, bad size", body(*fields(size="0x0")), route="/v1/videos")

    def image(name: str, raw: bytes | None, expect: set[int] = bad, content_type: str = "application/json"):
        cases.append((name, "POST", img, dict(content=raw or b"", headers={"content-type": content_type}), expect))

    ok = {"prompt": "a robot", "size": "32x32", "num_inference_steps": 1}
    image("images: multipart body", whole, bad, MULTIPART["content-type"])
    image("images: XML", b"<prompt>x</prompt>")
    image("images: truncated JSON", b'{"prompt": "a rob')
    image("images: non-UTF-8 JSON", b'{"prompt": "\xff\xfe"}')
    image("images: JSON list", b"[1, 2]")
    image("images: JSON string", b'"prompt"')
    image("images: JSON null", b"null")
    image("images: NaN", b'{"prompt": "x", "guidance_scale": NaN}')
    image("images: prompt object", json.dumps({"prompt": {"a": 1}}).encode())
    image("images: n huge", json.dumps({**ok, "n": 10**100}).encode())
    image("images: n float", json.dumps({**ok, "n": 1e100}).encode())
    image("images: n string", json.dumps({**ok, "n": "ten"}).encode())
    image("images: size list", json.dumps({**ok, "size": [32, 32]}).encode())
    image("images: size huge", json.dumps({**ok, "size": "100000x100000"}).encode())
    image("images: negative steps", json.dumps({**ok, "num_inference_steps": -1}).encode())
    image("images: seed 2^64", json.dumps({**ok, "seed": 2**64}).encode())
    image("images: extra_params list", json.dumps({**ok, "extra_params": [1]}).encode())
    image("images: deep extra_params", b'{"prompt": "x", "extra_params": ' + b"[" * 20_000 + b"]" * 20_000 + b"}")
    image("images: deep-ish extra_params", json.dumps({**ok, "extra_params": json.loads('{"a":' * 40 + "1" + "}" * 40)})
          .encode())
    image("images: body over the limit", json.dumps({**ok, "negative_prompt": "n" * (MAX_FIELD + 1)}).encode(), {413})
    image("images: duplicated keys", b'{"prompt": "a", "prompt": "b", "size": "32x32", "num_inference_steps": 1}',
          {200})
    image("images: response_format url", json.dumps({**ok, "response_format": "url"}).encode())
    image("images: prompt names a server file", json.dumps({**ok, "prompt": "/etc/passwd.txt"}).encode(), {200})

    # job routes and methods
    for job_id in ["..%2F..%2Fetc%2Fpasswd", "video_gen_" + "g" * 32, "video_gen_" + "A" * 32, "video_gen_" + "0" * 31,
                   "%00", "x" * 5000, "video_gen_" + "0" * 32 + ".mp4", "%E2%80%AE", "video_gen_..%2F" + "0" * 28]:
        for method, suffix in [("GET", ""), ("GET", "/content"), ("DELETE", "")]:
            cases.append((f"{method} job {job_id[:20]}{suffix}", method, f"/v1/videos/{job_id}{suffix}", {}, {404}))
    for params in [{"limit": "-1"}, {"limit": "abc"}, {"limit": "1e3"}, {"limit": "101"}, {"order": "ASC"},
                   {"limit": "9" * 5000}]:
        cases.append((f"list {params}", "GET", "/v1/videos", {"params": params}, bad))
    cases.append(("list after 10k chars", "GET", "/v1/videos", {"params": {"after": "x" * 10_000}}, {200}))
    cases.append(("PUT a video route", "PUT", "/v1/videos", {"content": b"x"}, {405}))
    cases.append(("PATCH images", "PATCH", img, {"content": b"x"}, {405}))
    cases.append(("unknown route", "GET", "/v1/../../etc/passwd", {}, {404}))
    return cases


def envelope_ok(response) -> None:
    body = response.json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert {"message", "type", "param", "code"} <= set(error)
    assert error["code"] == response.status_code and error["message"]


def test_malformed_corpus(server, mp4, long_mp4):
    failures = []
    cases = corpus(mp4, long_mp4)
    with httpx.Client(base_url=server.url, timeout=30) as http:
        for name, method, path, kwargs, expected in cases:
            try:
                response = http.request(method, path, **kwargs)
            except httpx.HTTPError as exc:  # e.g. the server closing after a 413; still an answer?
                failures.append(f"{name}: no answer ({type(exc).__name__}: {exc})")
                continue
            RESULTS.append((name, response.status_code))
            if response.status_code not in expected:
                failures.append(f"{name}: {response.status_code} {response.text[:200]}")
            elif response.status_code >= 400:
                try:
                    envelope_ok(response)
                except (AssertionError, ValueError) as exc:
                    failures.append(f"{name}: malformed error body {response.text[:200]} ({exc})")
        assert http.get("/health").json() == {"status": "healthy"}
    assert not failures, "\n".join(failures)
    assert len(cases) >= 150
    uploads = server.storage / "uploads"
    leftovers = list(uploads.glob("*")) if uploads.is_dir() else []
    assert leftovers == [], leftovers  # rejected uploads are removed


def test_streamed_body_over_the_limit_without_content_length(server):
    """Chunked transfer (no Content-Length): the limit is enforced while streaming."""
    def chunks():  # the fields, then a file part that never ends
        yield b"".join(fields()) + b"--" + BOUNDARY.encode() + \
            b'\r\nContent-Disposition: form-data; name="input_reference"; filename="big.mp4"\r\n\r\n'
        for _ in range(40):
            yield b"\0" * (64 * 1024)

    response = httpx.post(f"{server.url}/v1/videos/sync", content=chunks(), headers=MULTIPART, timeout=30)
    RESULTS.append(("chunked body over the limit", response.status_code))
    assert response.status_code == 413, response.text
    envelope_ok(response)
