/**
 * A table taken offline, on the tablet server (DESIGN.md, "Offline tables"; the manager's side is
 * manager/table-offline.ts).
 *
 * Asked by the manager to let a tablet go as offline, the server closes it (no job planned or reserved
 * from then on: its queue entries go with the next plan), cancels its reservations (`table-offline`: not
 * a failed attempt; each compactor hears it with its next progress report and stops) and unloads it.
 *
 * A server that did not answer had the tablet taken from it instead; the reservations it held stay in the
 * row. So whoever loads the tablet after the table is back online cancels every reservation made before
 * the table's `onlineAt` ({@link cutOff}): no compaction reserved before the table went offline commits
 * after it.
 */
import { ExcError } from '../errors.js';
import type { TabletMeta } from '../meta/tablet.js';
import type { HostedTablet } from './hosted-tablet.js';
import type { Hosting } from './hosting.js';
import type { Reservations } from './reservations.js';
import type { TableConfigs } from './table-configs.js';

/** The reservations of `meta` made before its table was last brought online (pure: the rule). */
export function cutOff(meta: TabletMeta, onlineAt: number | undefined): string[] {
  if (onlineAt === undefined) return [];
  return [...meta.reservations].filter(([, r]) => r.reservedAt < onlineAt).map(([ecid]) => ecid);
}

export class TableOffline {
  constructor(
    private readonly hosting: Hosting,
    private readonly reservations: Reservations,
    private readonly configs: TableConfigs,
  ) {}

  /** Lets the tablet `row` go as offline; resolves how many compactions it cancelled. */
  async letGo(row: string): Promise<number> {
    let tablet: HostedTablet;
    try {
      tablet = await this.hosting.get(row);
    } catch (err) {
      if (err instanceof ExcError && err.code === 'NOT_SERVING') return 0;
      throw err;
    }
    await this.configs.reload(tablet.meta.tableId).catch(() => undefined);
    tablet.closing = true;
    await this.hosting.replan(tablet);
    let cancelled = 0;
    for (const ecid of [...tablet.meta.reservations.keys()])
      if (await this.reservations.cancel(row, ecid, 'table-offline')) cancelled++;
    await this.hosting.unload(row, 'table offline');
    return cancelled;
  }

  /** After a load or a refresh: cancels what the table's last offline cut off (see the module comment). */
  cancelCutOff(tablet: HostedTablet): void {
    const onlineAt = this.configs.cached(tablet.meta.tableId)?.onlineAt;
    for (const ecid of cutOff(tablet.meta, onlineAt))
      void this.reservations.cancel(tablet.row, ecid, 'table-offline').catch(() => undefined);
  }
}
