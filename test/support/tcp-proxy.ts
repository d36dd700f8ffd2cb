// A TCP proxy a test controls, to take a dependency (PostgreSQL) away from a server and give it back:
// cut() destroys every connection through it and refuses new ones (connection refused: nothing listens),
// restore() listens again on the same port.
import net from "node:net";

export interface TcpProxy {
  /** The port clients connect to, on 127.0.0.1. */
  port: number;
  /** Drops every open connection and stops listening (new connections are refused). */
  cut(): Promise<void>;
  /** Listens again on the same port. */
  restore(): Promise<void>;
  close(): Promise<void>;
}

export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  const sockets = new Set<net.Socket>();
  const track = (s: net.Socket) => {
    sockets.add(s);
    s.once("close", () => sockets.delete(s));
    s.on("error", () => s.destroy());
  };
  const server = net.createServer((client) => {
    const upstream = net.connect(target.port, target.host);
    track(client);
    track(upstream);
    client.pipe(upstream);
    upstream.pipe(client);
    client.once("close", () => upstream.destroy());
    upstream.once("close", () => client.destroy());
  });
  const listen = (port: number) =>
    new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, "127.0.0.1", () => {
        server.off("error", reject);
        resolve();
      });
    });
  await listen(0);
  const port = (server.address() as net.AddressInfo).port;
  const stop = async () => {
    const closed = server.listening ? new Promise<void>((resolve) => server.close(() => resolve())) : Promise.resolve();
    for (const s of sockets) s.destroy();
    await closed;
  };
  return {
    port,
    cut: stop,
    restore: () => listen(port),
    close: stop,
  };
}
