"""N watchers of a daemon's /v1/status?watch=true, then one spec edit: prints when each watcher
received the edited row, counted from the file's write (p50, p99, max). Used by benches/api.sh.

Usage: watchers.py ADDRESS TOKEN N SPEC_DIR
The edit changes the prompt of the first Assignment in SPEC_DIR (a project written by
benches/daemon.sh).
"""

import asyncio
import os
import sys
import time


async def open_watch(address, token):
    """One watch, its answer's status line read: the API closes a peer's connections beyond a
    few that have not shown the token yet, so watchers are opened one after another."""
    host, port = address.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(
        (
            f"GET /v1/status?watch=true HTTP/1.1\r\nHost: {address}\r\n"
            f"Authorization: Bearer {token}\r\nAccept: text/event-stream\r\n\r\n"
        ).encode()
    )
    await writer.drain()
    status = await reader.readline()
    if b" 200 " not in status:
        raise RuntimeError(f"the watch was answered {status!r}")
    return reader, writer


async def watch(reader, writer, ready, edited_at, name, delays):
    # Only the bookmark is looked for in the first rows (each chunk with the end of the one
    # before, so a marker cut between chunks is found); after it, what came since.
    tail = b""
    after = None
    while True:
        chunk = await reader.read(1 << 20)
        if not chunk:
            raise RuntimeError("the watch ended")
        if after is None:
            seen = tail + chunk
            if b"event: BOOKMARK" in seen:
                after = b""
                ready.release()
            tail = seen[-64:]
            continue
        after += chunk
        if edited_at:
            # Chunk framing may cut an event; the row's name and its new generation both arrive.
            text = after.decode("utf-8", "replace")
            if "event: MODIFIED" in text and f'"name":"{name}","generation":2' in text:
                delays.append(time.monotonic() - edited_at[0])
                writer.close()
                return


async def main():
    address, token, count, folder = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    marker = "kind: Assignment\nmetadata: {name: "
    for entry in sorted(os.listdir(folder)):
        spec = os.path.join(folder, entry)
        if entry.endswith(".yaml"):
            with open(spec) as f:
                text = f.read()
            if marker in text:
                break
    else:
        raise SystemExit(f"no Assignment in {folder}")
    start = text.index(marker) + len(marker)
    name = text[start : text.index("}", start)]
    edited = text[:start] + text[start:].replace("prompt: p}", "prompt: edited}", 1)
    ready = asyncio.Semaphore(0)
    edited_at, delays = [], []
    opened = time.monotonic()
    tasks = []
    for _ in range(count):
        reader, writer = await open_watch(address, token)
        tasks.append(asyncio.create_task(watch(reader, writer, ready, edited_at, name, delays)))
    for _ in range(count):
        await ready.acquire()
    print(f"{count} watchers received every row and the bookmark in {time.monotonic() - opened:.2f} s")
    edited_at.append(time.monotonic())
    with open(spec, "w") as f:
        f.write(edited)
    await asyncio.wait_for(asyncio.gather(*tasks), timeout=120)
    delays.sort()
    pick = lambda q: delays[min(len(delays) - 1, int(q * len(delays)))] * 1000
    print(
        f"edit of {name} delivered to {len(delays)} watchers: "
        f"p50 {pick(0.5):.0f} ms, p99 {pick(0.99):.0f} ms, max {delays[-1] * 1000:.0f} ms"
    )


asyncio.run(main())
