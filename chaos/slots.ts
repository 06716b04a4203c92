/**
 * The chaos run's slots (cluster.ts): a role that always has one process, restarted when it exits, and
 * what a fault says about the exit it causes.
 */
import type { ManagedProcess } from '../test/support/process-group.js';
import type { TcpProxy } from '../test/support/proxy.js';

export type Role = 'manager' | 'tserver' | 'compactor';

/** An exit a fault announced: its exit code or signal, and until when it may happen. */
export interface ExpectedExit {
  codes: (number | null)[];
  signals: NodeJS.Signals[];
  until: number;
  why: string;
}

export interface Slot {
  name: string;
  role: Role;
  queue?: string;
  proc?: ManagedProcess;
  expect?: ExpectedExit;
  /** A fault keeps the slot down; it is started again only when released. */
  held: boolean;
  /** Delay before the next restart, set by the fault that stopped it. */
  restartAfterMs: number;
  /** A compactor's current node path; a tablet server's name; a manager's URL. */
  identity?: string;
  /** When the slot's current process became ready. */
  readyAt?: number;
  starts: number;
  /**
   * A slot that runs only while a fault wants it (the tablet server that joins for a while): down and
   * held, it is not missing, and the cluster is settled without it.
   */
  optional?: boolean;
  /**
   * The sick compactor (the `compactor-sick` fault): it reaches the object store through a proxy that
   * refuses every PUT, so each job it takes fails; it exits 5 after its failures, and is started again.
   */
  sick?: boolean;
  /** The slot's way to each ZooKeeper server (a fault cuts them all to cut the process off). */
  zkProxies?: TcpProxy[];
  /**
   * The way its peers reach the slot's process: it listens on `port` and advertises the proxy's port, so
   * that a fault can cut it off from every peer (tablet servers, compactors, managers, clients) at once.
   */
  peer?: { port: number; proxy: TcpProxy };
}

export interface UnexpectedExit {
  slot: string;
  code: number | null;
  signal: string | null;
  at: number;
  log: string;
}
