/**
 * Holds on the tablet server: the I/O around hold-rules.ts. A hosted tablet's holds are looked at when the
 * reservation they name ends on this server (its commit or cancel here: a split's daughters usually stay
 * together), when the tablet is loaded, and every reconciler round for those still there (a reservation
 * whose tablet moved ends on another server). For each: whether the reservation is still in its tablet's
 * row, and when it is not, its outcome row; then, in the tablet's mutex, the rules decide and hosting
 * applies the change.
 */
import { describeError } from '../errors.js';
import type { Logger } from '../log.js';
import type { MetaClient } from '../meta/client.js';
import { COL_OUTCOME, doneRow, parseOutcome } from '../meta/outcomes.js';
import { ecompCol } from '../meta/tablet.js';
import { decideHold, type HoldEvidence } from './hold-rules.js';
import type { HostedTablet } from './hosted-tablet.js';
import type { Hosting } from './hosting.js';

export class HoldResolver {
  readonly stats = { installed: 0, released: 0 };

  constructor(
    private readonly hosting: Hosting,
    private readonly meta: MetaClient,
    private readonly log: Logger,
  ) {}

  /** Looks at the holds on `ecid` of every hosted tablet: its reservation just ended here. */
  ended(ecid: string): void {
    for (const tablet of this.hosting.all()) {
      if (tablet.meta.holds.has(ecid)) void this.resolve(tablet, [ecid]);
    }
  }

  /** Looks at every hold of every hosted tablet that has some (a reconciler round). */
  async sweep(): Promise<void> {
    for (const tablet of this.hosting.all()) {
      if (tablet.meta.holds.size > 0) await this.resolve(tablet, [...tablet.meta.holds.keys()]);
    }
  }

  /** Decides and applies, for each of `ecids` still held by `tablet`. Failures wait for the next round. */
  async resolve(tablet: HostedTablet, ecids: readonly string[]): Promise<void> {
    for (const ecid of ecids) {
      const hold = tablet.meta.holds.get(ecid);
      if (!hold) continue;
      try {
        const evidence = await this.evidence(ecid, hold.tablet);
        await tablet.mutex.run(async () => {
          if (tablet.state !== 'hosted') return;
          if (tablet.stale) await this.hosting.resync(tablet);
          const current = tablet.meta.holds.get(ecid);
          if (!current) return;
          const decision = decideHold(tablet.meta, ecid, current, evidence, Date.now());
          if (decision.kind === 'wait') return;
          const applied = await this.hosting.change(tablet, { ...decision.change, replan: true });
          if (!applied) return;
          if (decision.kind === 'install') this.stats.installed++;
          else this.stats.released++;
          this.log.info(
            {
              tablet: tablet.row,
              ecid,
              from: hold.tablet,
              ...(decision.kind === 'release' ? { why: decision.why } : {}),
            },
            decision.kind === 'install' ? 'held compaction installed' : 'hold let go',
          );
        });
      } catch (err) {
        this.log.warn({ tablet: tablet.row, ecid, err: describeError(err) }, 'could not settle a hold yet');
      }
    }
  }

  /**
   * The reservation first, then its outcome: it ends in the mutation that writes the outcome, so once it
   * is gone the outcome is there (unless trimmed, long after). The other order could miss both.
   */
  private async evidence(ecid: string, tablet: string): Promise<HoldEvidence> {
    if ((await this.meta.row(tablet)).has(ecompCol(ecid))) return { reserved: true };
    const recorded = (await this.meta.row(doneRow(ecid))).get(COL_OUTCOME);
    const outcome = recorded === undefined ? undefined : parseOutcome(recorded);
    return { ...(outcome ? { outcome } : {}), reserved: false };
  }
}
