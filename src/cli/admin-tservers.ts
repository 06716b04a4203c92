/** `excompact admin tserver …`: list tablet servers, drain one (move every tablet off it), undo a drain. */
import type { Command } from 'commander';
import { examples, type JsonFlag } from './admin-common.js';
import { withCluster } from './connect.js';
import { action } from './exit.js';
import { nonEmpty } from './flags.js';
import { bytes, printJson, printTable } from './format.js';

interface TserverView {
  server: string;
  session: string;
  tablets: number;
  bytes: number;
  draining: boolean;
}

export function registerTservers(admin: Command): void {
  const tserver = admin
    .command('tserver')
    .description('List tablet servers; drain one (move its tablets to the others) or undo a drain.');

  tserver
    .command('list')
    .description('List the live tablet servers with their tablets and bytes.')
    .option('--json', 'print JSON')
    .addHelpText('after', examples(['excompact admin tserver list']))
    .action(
      action(async (opts: JsonFlag, cmd: Command) => {
        const { tservers } = await withCluster(cmd, (c) =>
          c.meta.call<{ tservers: TserverView[] }>('GET', '/v1/tservers', undefined, { idempotent: true }),
        );
        if (opts.json) return printJson(tservers);
        printTable(
          ['SERVER', 'TABLETS', 'BYTES', 'STATE'],
          [...tservers]
            .sort((a, b) => (a.server < b.server ? -1 : 1))
            .map((t) => [t.server, t.tablets, bytes(t.bytes), t.draining ? 'draining' : 'serving']),
        );
      }),
    );

  for (const [name, undo] of [
    ['drain', false],
    ['undrain', true],
  ] as const) {
    tserver
      .command(name)
      .description(
        undo
          ? 'Undo a drain: the server takes tablets again (the balancer gives it its share).'
          : 'Move every tablet off a tablet server and give it none (compactions running on them go on). Undo with `undrain`.',
      )
      .argument(
        '<server>',
        'the tablet server, host:port (as `tserver list` shows it)',
        nonEmpty('the server'),
      )
      .option('--wait', 'return once the server holds no tablet (drain only)')
      .option('--json', 'print JSON')
      .addHelpText('after', examples([`excompact admin tserver ${name} 10.0.0.7:9200`]))
      .action(
        action(async (server: string, opts: JsonFlag & { wait?: boolean }, cmd: Command) => {
          await withCluster(cmd, async (c) => {
            const answer = await c.meta.call<{ server: string; draining: boolean; live: boolean }>(
              'POST',
              `/v1/tservers/${encodeURIComponent(server)}/drain`,
              { undo, reason: 'admin' },
              { idempotent: true },
            );
            let left = 0;
            if (!undo && opts.wait) {
              for (;;) {
                const { tservers } = await c.meta.call<{ tservers: TserverView[] }>(
                  'GET',
                  '/v1/tservers',
                  undefined,
                  { idempotent: true },
                );
                left = tservers.find((t) => t.server === server)?.tablets ?? 0;
                if (left === 0) break;
                await new Promise((r) => setTimeout(r, 250));
              }
            }
            if (opts.json) return printJson({ ...answer, ...(opts.wait ? { tablets: left } : {}) });
            process.stdout.write(
              undo
                ? `tablet server ${server} takes tablets again\n`
                : `tablet server ${server} is draining${answer.live ? '' : ' (not live now)'}${opts.wait ? ': it holds no tablet' : ''}\n`,
            );
          });
        }),
      );
  }
}
