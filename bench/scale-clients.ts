/**
 * Light compactor clients for bench/scale (a child process; bench/scale-zk.ts starts several): each one a
 * ZooKeeper session of its own with the compactor's registration node (a protected ephemeral sequential
 * node under the queue's node, the way `compactor <queue>` registers), and nothing else — no merge, no
 * HTTP server. Thousands of compactors without thousands of processes.
 *
 * Configured by the JSON in SCALE_CLIENTS. Prints one JSON line when every session is registered:
 * `{"ready":n,"ms":…,"rss":…}`. With `reserve`, its one client then reserves a job on the given tablet and
 * prints `{"reserved":"<ecid>"}` — the parent then kills it with SIGKILL: a crashed compactor, whose
 * session ZooKeeper must expire. On SIGTERM it closes its sessions and exits.
 */
import { RpcClient } from '../src/rpc/client.js';
import type { ReservedJob } from '../src/queue/protocol.js';
import { ZkSession, createProtected, digestAuthFromSecret } from '../src/zk/index.js';

export interface ClientsConfig {
  connectString: string;
  secret: string;
  /** The queue's node, under which compactors register. */
  queueNode: string;
  count: number;
  sessionTimeoutMs: number;
  /** Sessions opened at once. */
  concurrency: number;
  reserve?: { url: string; tablet: string; queueId: string };
}

const config = JSON.parse(process.env.SCALE_CLIENTS ?? '') as ClientsConfig;
const sessions: ZkSession[] = [];
const started = Date.now();
let next = 0;
const paths: string[] = [];

async function openOne(): Promise<string> {
  const session = await ZkSession.connect({
    connectString: config.connectString,
    sessionTimeoutMs: config.sessionTimeoutMs,
    auth: digestAuthFromSecret(config.secret),
  });
  sessions.push(session);
  const info = JSON.stringify({
    host: '127.0.0.1',
    port: 0,
    pid: process.pid,
    since: Date.now(),
    light: true,
  });
  return (await createProtected(session, config.queueNode, 'c-', info)).path;
}

await Promise.all(
  Array.from({ length: Math.min(config.concurrency, config.count) }, async () => {
    while (next < config.count) {
      next++;
      paths.push(await openOne());
    }
  }),
);
const say = (o: object): boolean => process.stdout.write(`${JSON.stringify(o)}\n`);
say({ ready: sessions.length, ms: Date.now() - started, rss: process.memoryUsage().rss });

if (config.reserve) {
  const { url, tablet, queueId } = config.reserve;
  const rpc = new RpcClient({ baseUrl: url, secret: config.secret, timeoutMs: 30_000, attempts: 1 });
  const { job } = await rpc.post<{ job: ReservedJob | null }>('/v1/reserve', {
    tablet,
    queueId,
    compactor: paths[0],
  });
  say({ reserved: job?.ecid ?? null });
}

process.on('SIGTERM', () => {
  void (async () => {
    for (let i = 0; i < sessions.length; i += 200)
      await Promise.all(sessions.slice(i, i + 200).map((s) => s.close().catch(() => undefined)));
    process.exit(0);
  })();
});
// Stay up (the sessions' sockets keep the loop alive; this keeps it alive when there are none).
setInterval(() => undefined, 60_000);
