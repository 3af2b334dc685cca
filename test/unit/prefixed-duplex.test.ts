import { once } from "node:events";
import { type AddressInfo, connect, createServer, type Socket } from "node:net";
import { describe, expect, it } from "vitest";
import { PrefixedDuplex } from "../../lib/transport/prefixed-duplex.js";

describe("PrefixedDuplex", () => {
  it("reads the prefix first, then the socket, and reports the socket's byte counters", async () => {
    const server = createServer();
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    const client = connect((server.address() as AddressInfo).port, "127.0.0.1");
    const [accepted] = (await once(server, "connection")) as [Socket];
    const duplex = new PrefixedDuplex(accepted, Buffer.from("PRI "));

    client.write("rest");
    let text = "";
    duplex.on("data", (c: Buffer) => {
      text += c.toString();
    });
    await new Promise<void>((resolve) => {
      const check = () => (text === "PRI rest" ? resolve() : setImmediate(check));
      check();
    });
    expect(duplex.bytesRead).toBe(accepted.bytesRead);
    expect(duplex.bytesRead).toBe(4);

    duplex.write("answer");
    await once(client, "data");
    expect(duplex.bytesWritten).toBe(accepted.bytesWritten);
    expect(duplex.bytesWritten).toBe(6);

    client.destroy();
    duplex.destroy();
    server.close();
    await once(server, "close");
  });
});
