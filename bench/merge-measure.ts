/** Timing and memory helpers of the merge benchmark (tables and numbers: lib.ts). */
import { spawn } from 'node:child_process';
import { openSync, closeSync, readFileSync } from 'node:fs';

/** Runs `fn` `rounds` times and returns the fastest time in ms (the least disturbed by other work). */
export async function best(rounds: number, fn: () => Promise<unknown>): Promise<number> {
  return (await bestWithCpu(rounds, fn)).ms;
}

/** A run's wall time and the CPU time this process (all its threads) spent in it, in ms. */
export interface Timed {
  ms: number;
  cpuMs: number;
}

/** One run of `fn`, timed. */
export async function timed(fn: () => Promise<unknown>): Promise<Timed> {
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await fn();
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  return { ms, cpuMs: (cpu.user + cpu.system) / 1000 };
}

/**
 * The least of each over runs: the fastest wall time, and the least CPU time any run took (not
 * necessarily the same run's). A figure per CPU-second takes the least CPU: a run slowed by a neighbour
 * on a shared machine (a host's other tenants) costs more CPU-seconds for the same work, as a slow run
 * costs more wall time.
 */
export function least(a: Timed, b: Timed): Timed {
  return { ms: Math.min(a.ms, b.ms), cpuMs: Math.min(a.cpuMs, b.cpuMs) };
}

export const NOT_RUN: Timed = { ms: Infinity, cpuMs: Infinity };

/**
 * Like {@link best}, with the CPU time this process (all its threads) spent in that fastest run: what a
 * compactor costs in cores, whatever else (a server, other work) shares the machine.
 */
export async function bestWithCpu(
  rounds: number,
  fn: () => Promise<unknown>,
): Promise<{ ms: number; cpuMs: number }> {
  let fastest = { ms: Infinity, cpuMs: Infinity };
  for (let i = 0; i < rounds; i++) {
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    await fn();
    const ms = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    if (ms < fastest.ms) fastest = { ms, cpuMs: (cpu.user + cpu.system) / 1000 };
  }
  return fastest;
}

/**
 * Runs each of `fns` once per round, in turn, for `rounds` rounds; returns the best time of each in ms.
 * Alternating puts every figure through the same moments of a shared machine, so that their ratio does
 * not depend on which ran while a neighbour was busy.
 */
export async function alternate(rounds: number, fns: (() => Promise<unknown>)[]): Promise<number[]> {
  const bests = fns.map(() => Infinity);
  for (let r = 0; r < rounds; r++) {
    for (const [i, fn] of fns.entries()) {
      const t0 = performance.now();
      await fn();
      bests[i] = Math.min(bests[i]!, performance.now() - t0);
    }
  }
  return bests;
}

/** Runs a command with its output sent to /dev/null; resolves when it exits 0. */
export async function runCommand(
  command: string,
  args: string[],
  env: Record<string, string> = {},
): Promise<void> {
  const devNull = openSync('/dev/null', 'w');
  try {
    await new Promise<void>((resolve, reject) => {
      const child = spawn(command, args, {
        stdio: ['ignore', devNull, 'inherit'],
        env: { ...process.env, ...env },
      });
      child.once('error', reject);
      child.once('exit', (code, signal) =>
        code === 0 ? resolve() : reject(new Error(`${command} exited with ${code ?? signal}`)),
      );
    });
  } finally {
    closeSync(devNull);
  }
}

/** Peak resident set size of this process so far (VmHWM), in bytes; null where /proc is missing. */
export function peakRss(): number | null {
  try {
    const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'));
    return m ? Number(m[1]) * 1024 : null;
  } catch {
    return null;
  }
}

export const MB = 1_000_000;

export function fmtRatio(r: number): string {
  return `${r.toFixed(2)}×`;
}
