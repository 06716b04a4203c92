/**
 * Logging: one root pino logger per process writing JSON lines to stdout, and a child logger per
 * component with structured fields (`tablet`, `ecid`, `queue`, `compactor`, ...), never formatted strings.
 *
 * pino is loaded with the first real logger, not with this module: client commands log nothing (they use
 * silentLogger) and start faster without it.
 */
import { createRequire } from 'node:module';
import type { DestinationStream, Logger, LevelWithSilent } from 'pino';
import type * as Pino from 'pino';

export type { Logger };

const require = createRequire(import.meta.url);
let loaded: typeof Pino.pino | undefined;
const pino = (): typeof Pino.pino => (loaded ??= (require('pino') as typeof Pino).pino);

export interface LoggerOptions {
  /** Process name, e.g. `manager`, `tserver`, `compactor`. */
  name: string;
  level?: LevelWithSilent;
  /** Where to write; default stdout. Tests pass a stream to capture lines. */
  destination?: DestinationStream;
}

export function createLogger(options: LoggerOptions): Logger {
  const p = pino();
  const opts = {
    name: options.name,
    level: options.level ?? 'info',
    base: { pid: process.pid },
    timestamp: p.stdTimeFunctions.isoTime,
    // Errors logged under `err` keep their code and details.
    serializers: { err: p.stdSerializers.err },
  };
  // Asynchronous writes to stdout, with a bounded buffer: a stdout nobody reads (a stuck log collector, a
  // dead parent) must not block the event loop — a blocked process cannot even handle SIGTERM. Lines
  // beyond the buffer are dropped; what is buffered is flushed at exit.
  return p(opts, options.destination ?? p.destination({ dest: 1, sync: false, maxLength: 16 * 1024 * 1024 }));
}

const ignore = (): void => undefined;
/** Every method of a logger that writes nothing (the ones this project calls, and their siblings). */
const SILENT = {
  level: 'silent',
  trace: ignore,
  debug: ignore,
  info: ignore,
  warn: ignore,
  error: ignore,
  fatal: ignore,
  silent: ignore,
  flush: ignore,
  isLevelEnabled: () => false,
  bindings: () => ({}),
  child: () => SILENT,
};

/** A logger that drops everything, for client commands, unit tests and library callers that pass none. */
export function silentLogger(): Logger {
  return SILENT as unknown as Logger;
}
