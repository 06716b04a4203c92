/**
 * What the three server processes (manager, tablet server, compactor) share: their connection settings,
 * their state (logged and reported on every change, stopped exactly once), their authenticated RPC server
 * and how they join ZooKeeper.
 */
import type { Registry } from 'prom-client';
import type { Logger } from './log.js';
import { metricsEndpoint } from './metrics.js';
import { RpcServer } from './rpc/server.js';
import { ZkSession, digestAuthFromSecret } from './zk/index.js';

/** The settings every server process is started with (from {@link Config}, plus its secret and logger). */
export interface ServerOptions {
  zk: string;
  zkRoot: string;
  zkSessionTimeoutMs: number;
  secret: string;
  bindHost: string;
  port: number;
  advertiseHost?: string;
  rpcTimeoutMs: number;
  /** How long a call to the manager keeps trying through a failover (MetaClient; default 30 s). */
  managerFailoverMs?: number;
  rpcMaxBodyBytes: number;
  rpcMaxSkewMs: number;
  logger: Logger;
}

/** The states every process ends in. */
export type EndState = 'stopping' | 'stopped';

/**
 * A process's state. Every change is logged as `<what> state` with `from` and `to` and passed to
 * `onChange`; {@link stopOnce} runs the shutdown between `stopping` and `stopped` once, whoever asks first.
 */
export class ProcessState<S extends string> {
  private current: S | EndState;
  private stopping: Promise<void> | undefined;

  constructor(
    initial: S,
    private readonly log: Logger,
    private readonly what: string,
    private readonly onChange: (next: S | EndState) => void,
  ) {
    this.current = initial;
  }

  get value(): S | EndState {
    return this.current;
  }

  /** True once the process is stopping (or stopped): nothing new should start. */
  get ending(): boolean {
    return this.current === 'stopping' || this.current === 'stopped';
  }

  /** Moves to `next`; once stopping, only `stopped` may follow (a late "running" would lie to /healthz). */
  set(next: S | EndState): void {
    if (this.current === next) return;
    if (this.ending && next !== 'stopped') return;
    this.log.info({ from: this.current, to: next }, `${this.what} state`);
    this.current = next;
    this.onChange(next);
  }

  /** Enters `stopping`, runs `stop`, enters `stopped`; later calls share the first call's promise. */
  stopOnce(stop: () => Promise<void>): Promise<void> {
    this.stopping ??= (async () => {
      this.set('stopping');
      await stop();
      this.set('stopped');
    })();
    return this.stopping;
  }
}

/** The process's authenticated RPC server, with `/healthz` from `health` and `/metrics` from `registry`. */
export function serverRpc(
  options: ServerOptions,
  health: () => { ok: boolean; [key: string]: unknown },
  registry: Registry,
): RpcServer {
  return new RpcServer({
    secret: options.secret,
    logger: options.logger,
    maxBodyBytes: options.rpcMaxBodyBytes,
    maxSkewMs: options.rpcMaxSkewMs,
    health,
    metrics: metricsEndpoint(registry),
  });
}

/** A ZooKeeper session authenticated with the instance secret (its nodes get the instance ACL). */
export function connectZk(options: ServerOptions): Promise<ZkSession> {
  return ZkSession.connect({
    connectString: options.zk,
    sessionTimeoutMs: options.zkSessionTimeoutMs,
    auth: digestAuthFromSecret(options.secret),
    logger: options.logger,
  });
}
