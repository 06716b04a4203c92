/**
 * Flag parsers and the flags every server process takes. Only what defining a command needs: the CLI
 * builds every command at start, so nothing here may load what running one needs (see server-setup.ts).
 */
import { InvalidArgumentError, type Command } from 'commander';

/**
 * The parser of an integer flag from `min` to `max` (no upper bound when omitted); anything else stops the
 * command with a message naming the flag and its range.
 */
export function intOption(name: string, min: number, max?: number): (value: string) => number {
  const range =
    max !== undefined
      ? `an integer from ${min} to ${max}`
      : min === 1
        ? 'a positive integer'
        : `an integer >= ${min}`;
  return (value) => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < min || (max !== undefined && n > max))
      throw new InvalidArgumentError(`${name} must be ${range}`);
    return n;
  };
}

/**
 * The parser of a name or id (an argument or a flag's value) that must not be empty: an empty one would
 * leave its segment out of the request's path and ask for something else (`table info ""` asked for the
 * list of tables).
 */
export function nonEmpty(what: string): (value: string) => string {
  return (value) => {
    if (value === '') throw new InvalidArgumentError(`${what} must not be empty`);
    return value;
  };
}

/** The parser of a name a command gives what it writes (`--batch-id`, `--id`): 1-64 of [0-9A-Za-z_-]. */
export function idOption(flag: string): (value: string) => string {
  return (value) => {
    if (!/^[0-9A-Za-z_-]{1,64}$/.test(value))
      throw new InvalidArgumentError(`${flag} must be 1-64 letters, digits, _ or -`);
    return value;
  };
}

/** Flags shared by every server process; each overrides its environment variable. */
export interface ServerFlags {
  port?: string;
  bind?: string;
  advertise?: string;
  advertisePort?: string;
}

export function serverOptions(command: Command): Command {
  return command
    .option('--port <port>', 'HTTP port, 0 for any free one (EXC_PORT)')
    .option('--bind <host>', 'address to listen on (EXC_BIND_HOST)')
    .option('--advertise <host>', 'host name other processes use to reach this one (EXC_ADVERTISE_HOST)')
    .option('--advertise-port <port>', 'port other processes use to reach this one (EXC_ADVERTISE_PORT)');
}
