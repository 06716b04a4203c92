/**
 * What the three server processes (manager, tablet server, compactor) share: their connection settings,
 * their state (logged and reported on every change, stopped exactly once), their authenticated RPC server
 * and how they join ZooKeeper.
 */
import { renameSync, writeFileSync } from 'node:fs';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { Logger } from './log.js';
import { metricsEndpoint, rpcTiming } from './metrics.js';
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
  /** Port other processes use to reach this one (0 or absent: the bound port). */
  advertisePort?: number;
  /** Where to write the bound port once listening (EXC_PORT_FILE; for `excompact health`). */
  portFile?: string;
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
 * A process's life, written down in one place: for each state, the states it may move to. `stopping`
 * may follow any state and `stopped` only `stopping`; they need not be listed.
 */
export type Lifecycle<S extends string> = Readonly<Record<S, readonly S[]>>;

export interface ProcessStateOptions<S extends string> {
  initial: S;
  lifecycle: Lifecycle<S>;
  log: Logger;
  /** The process, as it appears in the log: `<what> state`. */
  what: string;
  /** Exports `excompact_process_state{state}` and `excompact_process_transitions_total{from,to}`. */
  registry?: Registry;
  onChange?: (next: S | EndState, cause: string) => void;
}

/**
 * A process's state machine. Every change is checked against the lifecycle, logged as `<what> state` with
 * `from`, `to` and its `cause`, counted, and passed to `onChange`; a change the lifecycle does not allow is
 * a bug, logged and refused. {@link stopOnce} runs the shutdown between `stopping` and `stopped` once,
 * whoever asks first; once stopping nothing but `stopped` follows (a late "serving" would lie to
 * /healthz).
 */
export class ProcessState<S extends string> {
  private current: S | EndState;
  private stopping: Promise<void> | undefined;
  private readonly transitions: Counter<'from' | 'to'> | undefined;

  constructor(private readonly options: ProcessStateOptions<S>) {
    this.current = options.initial;
    const { registry, lifecycle } = options;
    if (registry) {
      const states = [...Object.keys(lifecycle), 'stopping', 'stopped'];
      const gauge = new Gauge({
        name: 'excompact_process_state',
        help: 'The process state: 1 for the current one, 0 for the others',
        labelNames: ['state'],
        registers: [registry],
      });
      this.show = () => {
        for (const state of states) gauge.set({ state }, state === this.current ? 1 : 0);
      };
      this.show();
      this.transitions = new Counter({
        name: 'excompact_process_transitions_total',
        help: 'State changes of the process, by from and to',
        labelNames: ['from', 'to'],
        registers: [registry],
      });
    }
  }

  private show: () => void = () => undefined;

  get value(): S | EndState {
    return this.current;
  }

  /** True once the process is stopping (or stopped): nothing new should start. */
  get ending(): boolean {
    return this.current === 'stopping' || this.current === 'stopped';
  }

  /** Whether the lifecycle allows moving from the current state to `next`. */
  allows(next: S | EndState): boolean {
    if (next === 'stopping') return !this.ending;
    if (next === 'stopped') return this.current === 'stopping';
    if (this.ending) return false;
    return (this.options.lifecycle[this.current as S] ?? []).includes(next);
  }

  /** Moves to `next` because of `cause`. Resolves whether it moved (not when already there or refused). */
  set(next: S | EndState, cause: string): boolean {
    if (this.current === next) return false;
    if (!this.allows(next)) {
      // Once stopping, a late event is expected (a reconnection finishing); otherwise it is a bug.
      if (!this.ending)
        this.options.log.error(
          { from: this.current, to: next, cause },
          `${this.options.what}: transition refused`,
        );
      return false;
    }
    const from = this.current;
    this.options.log.info({ from, to: next, cause }, `${this.options.what} state`);
    this.current = next;
    this.transitions?.inc({ from, to: next });
    this.show();
    this.options.onChange?.(next, cause);
    return true;
  }

  /** Enters `stopping`, runs `stop`, enters `stopped`; later calls share the first call's promise. */
  stopOnce(stop: () => Promise<void>, cause = 'stop requested'): Promise<void> {
    this.stopping ??= (async () => {
      this.set('stopping', cause);
      await stop();
      this.set('stopped', 'shutdown done');
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
    timing: rpcTiming(registry),
    ...(options.advertisePort ? { advertisedPort: options.advertisePort } : {}),
  });
}

/**
 * Starts `server` listening on the configured address; with a port file, writes the bound port there
 * (whole or not at all: a health check never reads half a number).
 */
export async function listen(
  server: RpcServer,
  options: ServerOptions,
): Promise<{ host: string; port: number }> {
  const bound = await server.listen(options.bindHost, options.port);
  if (options.portFile) {
    const temp = `${options.portFile}.${process.pid}.tmp`;
    writeFileSync(temp, `${bound.port}\n`);
    renameSync(temp, options.portFile);
  }
  return bound;
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
