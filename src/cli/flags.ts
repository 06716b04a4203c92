import type { Command } from 'commander';

/** Flags shared by every server process; each overrides its environment variable. */
export interface ServerFlags {
  port?: string;
  bind?: string;
  advertise?: string;
}

export function serverOptions(command: Command): Command {
  return command
    .option('--port <port>', 'HTTP port, 0 for any free one (EXC_PORT)')
    .option('--bind <host>', 'address to listen on (EXC_BIND_HOST)')
    .option('--advertise <host>', 'host name other processes use to reach this one (EXC_ADVERTISE_HOST)');
}
