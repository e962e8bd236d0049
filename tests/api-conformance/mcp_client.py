"""The official MCP Python SDK (`mcp`) as a streamable-HTTP client of a live daemon's admin
endpoint: initialize, list the tools (each must declare an outputSchema), call every read tool
and a reconcile (the SDK checks each result's structuredContent against the tool's
outputSchema), and a request from a page of another site is refused.

    python3 mcp_client.py BASE_URL TOKEN
"""

import asyncio
import sys
import urllib.error
import urllib.request

from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client

base_url, token = sys.argv[1:3]
READS = ["status", "adapters", "assignments", "sessions", "proposals"]


async def main():
    headers = {"Authorization": f"Bearer {token}"}
    async with streamablehttp_client(f"{base_url}/mcp", headers=headers) as (read, write, _):
        async with ClientSession(read, write) as session:
            initialized = await session.initialize()
            if initialized.serverInfo.name != "roundtable-admin":
                sys.exit(f"server: {initialized.serverInfo}")
            tools = (await session.list_tools()).tools
            missing = [tool.name for tool in tools if not tool.outputSchema]
            if missing:
                sys.exit(f"tools without an outputSchema: {missing}")
            for name in READS:
                result = await session.call_tool(name, {})
                if result.isError or result.structuredContent is None or "items" not in result.structuredContent:
                    sys.exit(f"{name}: {result}")
            queued = await session.call_tool("reconcile", {"object": "Assignment/docs"})
            if queued.isError:
                sys.exit(f"reconcile: {queued}")
            refused = await session.call_tool("reconcile", {"object": "Assignment/nope"})
            if not refused.isError:
                sys.exit(f"reconcile of an unknown object: {refused}")
    # A page of another site, with the operator's token attached, is refused before JSON-RPC.
    request = urllib.request.Request(
        f"{base_url}/mcp",
        data=b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}',
        method="POST",
        headers={**headers, "Content-Type": "application/json", "Origin": "https://evil.example"},
    )
    try:
        urllib.request.urlopen(request, timeout=10)
        sys.exit("a request with a foreign Origin was answered")
    except urllib.error.HTTPError as error:
        if error.code != 403:
            sys.exit(f"a foreign Origin got {error.code}, not 403")
    print(f"mcp client: {len(tools)} tools, each with an outputSchema; {len(READS)} read tools and reconcile called")


asyncio.run(main())
