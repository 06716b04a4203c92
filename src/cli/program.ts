/**
 * The `excompact` command line: every command, each in its own module, registered here. main.ts runs it;
 * tests inspect it (the compose file's commands must be valid commands).
 */
import { Command } from 'commander';
import { action } from './exit.js';
import { registerLocal } from './local.js';
import { registerManager } from './manager.js';
import { registerTserver } from './tserver.js';
import { registerCompactor } from './compactor.js';
import { registerAdmin } from './admin.js';
import { configFrom, connectionOptions } from './connect.js';
import { registerBulk } from './bulk.js';
import { registerData } from './data.js';
import { registerHealth } from './health.js';
import { registerMonitor } from './monitor.js';

export function buildProgram(): Command {
  const program = new Command();
  program
    .name('excompact')
    .description(
      'External compactions for a tablet store: tablet servers select and reserve work, compactors run it.',
    )
    .showHelpAfterError('(run with --help for usage)')
    .configureOutput({ outputError: (text, write) => write(text) });
  connectionOptions(program);

  program
    .command('config')
    .description('Show the configuration reference, or the ZooKeeper digest credentials of this instance.')
    .option('--docs', 'print the reference as a Markdown table (the default)')
    .option(
      '--zk-digest',
      'print the digest user:password for `addauth digest` in zkCli.sh (needs the secret)',
    )
    .addHelpText(
      'after',
      '\nExamples:\n  excompact config --docs\n  EXC_SECRET_FILE=/etc/excompact/secret excompact config --zk-digest\n',
    )
    .action(
      action(async (opts: { zkDigest?: boolean }, cmd: Command) => {
        const { configReference, requireSecret } = await import('../config.js');
        if (opts.zkDigest) {
          const { digestAuthFromSecret } = await import('../zk/acl.js');
          const auth = digestAuthFromSecret(requireSecret(configFrom(cmd)));
          process.stdout.write(`${auth.user}:${auth.password}\n`);
          return;
        }
        process.stdout.write(`${configReference()}\n`);
      }),
    );

  registerLocal(program);
  registerManager(program);
  registerTserver(program);
  registerCompactor(program);
  registerAdmin(program);
  registerData(program);
  registerBulk(program);
  registerHealth(program);
  registerMonitor(program);
  return program;
}
