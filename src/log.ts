/**
 * Logging: one root pino logger per process writing JSON lines to stdout, and a child logger per
 * component with structured fields (`tablet`, `ecid`, `queue`, `compactor`, ...), never formatted strings.
 */
import { pino, type DestinationStream, type Logger, type LevelWithSilent } from 'pino';

export type { Logger };

export interface LoggerOptions {
  /** Process name, e.g. `manager`, `tserver`, `compactor`. */
  name: string;
  level?: LevelWithSilent;
  /** Where to write; default stdout. Tests pass a stream to capture lines. */
  destination?: DestinationStream;
}

export function createLogger(options: LoggerOptions): Logger {
  const opts = {
    name: options.name,
    level: options.level ?? 'info',
    base: { pid: process.pid },
    timestamp: pino.stdTimeFunctions.isoTime,
    // Errors logged under `err` keep their code and details.
    serializers: { err: pino.stdSerializers.err },
  };
  // Asynchronous writes to stdout, with a bounded buffer: a stdout nobody reads (a stuck log collector, a
  // dead parent) must not block the event loop — a blocked process cannot even handle SIGTERM. Lines
  // beyond the buffer are dropped; what is buffered is flushed at exit.
  return pino(
    opts,
    options.destination ?? pino.destination({ dest: 1, sync: false, maxLength: 16 * 1024 * 1024 }),
  );
}

/** A logger that drops everything, for unit tests and library callers that pass none. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
