// The channel's answer to an event sent with "ack": written on that connection only after brim
// handled the event (the SDK waits for it before drawing what comes next), never for other messages.
import { createConnection } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { ChannelServer, type ChannelMessage } from "../../src/job/channel.ts";

let server: ChannelServer | null = null;
afterEach(async () => {
  await server?.close();
  server = null;
});

/** Connects, writes these lines, and collects what the server answers until `until` lines came (the server answers in order). */
async function talk(path: string, lines: object[], until: number): Promise<string[]> {
  const socket = createConnection(path);
  const got: string[] = [];
  let text = "";
  await new Promise<void>((resolve, reject) => {
    socket.on("error", reject);
    socket.on("data", (chunk) => {
      text += chunk.toString("utf8");
      const parts = text.split("\n");
      text = parts.pop() ?? "";
      got.push(...parts);
      if (got.length >= until) resolve();
    });
    socket.write(lines.map((line) => `${JSON.stringify(line)}\n`).join(""));
  });
  socket.destroy();
  return got;
}

const base = { v: 1, t: 1, pid: 42 };

describe("the channel's ack", () => {
  it("answers an event sent with ack once it has been handled, naming its kind", async () => {
    const seen: ChannelMessage[] = [];
    server = await ChannelServer.listen((message) => seen.push(message));
    const answers = await talk(
      server.path,
      [
        { ...base, type: "hello" },
        { ...base, type: "event", kind: "knob_read", step: null, message: null, details: {} },
        { ...base, type: "event", kind: "attach_on", step: null, message: null, details: {}, ack: true },
      ],
      1,
    );
    // by the time the answer arrived, brim had handled the event
    expect(seen.map((m) => m.kind)).toEqual([undefined, "knob_read", "attach_on"]);
    expect(answers.map((a) => JSON.parse(a) as unknown)).toEqual([{ v: 1, type: "ack", kind: "attach_on" }]);
  });

  it("answers nothing to messages without it: the one answer that comes is the acked event's", async () => {
    server = await ChannelServer.listen(() => {});
    const answers = await talk(
      server.path,
      [
        { ...base, type: "hello" },
        { ...base, type: "event", kind: "knob_read", step: null, message: null, details: {} },
        { ...base, type: "event", kind: "attach_on", step: null, message: null, details: {}, ack: false },
        { ...base, type: "event", kind: "probe", step: null, message: null, details: {}, ack: true },
      ],
      1,
    );
    expect(answers.map((a) => JSON.parse(a) as unknown)).toEqual([{ v: 1, type: "ack", kind: "probe" }]);
  });
});
