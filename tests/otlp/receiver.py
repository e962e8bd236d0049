"""An OTLP/HTTP trace receiver for the tests: decodes each POST /v1/traces body with the official
`opentelemetry-proto` package (PyPI) and appends one JSON line per span to OUT_FILE: its trace,
span and parent IDs, name, times, attributes, and the resource's attributes. No collector package
exists for this platform; this is the part of one the tests need.

Usage: receiver.py PORT_FILE OUT_FILE [--hang]
  PORT_FILE  where the port it listens on (127.0.0.1, chosen by the system) is written
  --hang     accept connections and never answer (an exporter must not wait on it)
"""

import http.server
import json
import sys
import threading
import time

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


def value_of(any_value):
    kind = any_value.WhichOneof("value")
    if kind is None:
        return None
    value = getattr(any_value, kind)
    if kind == "array_value":
        return [value_of(v) for v in value.values]
    if kind == "kvlist_value":
        return {kv.key: value_of(kv.value) for kv in value.values}
    return value


def attributes(pairs):
    return {kv.key: value_of(kv.value) for kv in pairs}


class Receiver(http.server.BaseHTTPRequestHandler):
    out_file = None
    lock = threading.Lock()

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        if self.path != "/v1/traces" or self.headers.get("Content-Type") != "application/x-protobuf":
            self.send_error(404, f"not an OTLP/HTTP protobuf trace export: {self.path} {self.headers.get('Content-Type')}")
            return
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        lines = []
        for resource_spans in request.resource_spans:
            resource = attributes(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    lines.append(
                        json.dumps(
                            {
                                "trace": span.trace_id.hex(),
                                "span": span.span_id.hex(),
                                "parent": span.parent_span_id.hex(),
                                "name": span.name,
                                "start": span.start_time_unix_nano,
                                "end": span.end_time_unix_nano,
                                "attributes": attributes(span.attributes),
                                "status": span.status.code,
                                "resource": resource,
                            }
                        )
                    )
        with Receiver.lock, open(Receiver.out_file, "a") as out:
            for line in lines:
                out.write(line + "\n")
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


class Hanging(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        time.sleep(3600)


def main():
    port_file, out_file = sys.argv[1], sys.argv[2]
    handler = Hanging if "--hang" in sys.argv[3:] else Receiver
    Receiver.out_file = out_file
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    with open(port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    import os

    os.replace(port_file + ".tmp", port_file)
    server.serve_forever()


main()
