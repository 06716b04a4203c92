/**
 * Progress reports from compactors (POST /v1/progress), beside reservations.ts: the figures kept in
 * memory for the stall detector and persisted every few seconds, the checkpoint a report may carry
 * recorded in the reservation at most every checkpoint interval (resume-rules.ts), and the stall detector
 * itself, which cancels a reservation whose figures stopped moving.
 */
import type { Logger } from '../log.js';
import type { Progress } from '../meta/tablet.js';
import type { ProgressFigures } from './hosted-tablet.js';
import type { Hosting } from './hosting.js';
import { progressChange, progressMoved } from './progress-rules.js';
import {
  checkpointChange,
  checkpointDue,
  type CheckpointPersist,
  type ReportedCheckpoint,
} from './resume-rules.js';
import { ownedReservation } from './rules.js';

export interface ProgressReportsDeps {
  hosting: Hosting;
  log: Logger;
  /** Persist progress at most this often per reservation (default 5 s). */
  progressPersistMs?: number;
  /** Record checkpoints at most this often (default 64 MB or 30 s). */
  checkpointPersist: CheckpointPersist;
  /** Cancels a reservation that stalled. */
  cancelStalled: (tablet: string, ecid: string, error: string) => Promise<unknown>;
}

export class ProgressReports {
  private stallTimer: NodeJS.Timeout | undefined;
  /** Checkpoints recorded (for /status and tests). */
  checkpoints = 0;

  constructor(private readonly deps: ProgressReportsDeps) {}

  startStallDetector(stallMs: number): void {
    if (stallMs <= 0) return;
    this.stallTimer = setInterval(
      () => void this.cancelStalled(stallMs),
      Math.max(250, Math.min(stallMs / 4, 5_000)),
    );
    this.stallTimer.unref();
  }

  stop(): void {
    clearInterval(this.stallTimer);
  }

  /** Records a progress report; persisted at most every few seconds (fenced, and only while reserved). */
  async report(
    tabletRow: string,
    ecid: string,
    compactor: string,
    progress: ProgressFigures,
    checkpoint?: ReportedCheckpoint,
  ): Promise<void> {
    const { hosting } = this.deps;
    const tablet = await hosting.get(tabletRow);
    const r = ownedReservation(tablet.meta, ecid, compactor);
    const now = Date.now();
    const seen = tablet.reported.get(ecid);
    const moved = progressMoved(seen?.figures, progress);
    tablet.reported.set(ecid, { movedAt: moved || !seen ? now : seen.movedAt, figures: progress });
    const persist = this.deps.checkpointPersist;
    if (checkpoint && checkpointDue(r, checkpoint, now, persist)) {
      await tablet.mutex.run(async () => {
        // Checked again in the mutex: reports that queued behind one write do not each write again.
        const current = tablet.meta.reservations.get(ecid);
        if (!current || current.compactor !== compactor || !checkpointDue(current, checkpoint, now, persist))
          return;
        if (await hosting.change(tablet, checkpointChange(tablet.meta, ecid, current, checkpoint, now))) {
          this.checkpoints++;
          this.deps.log.info(
            { tablet: tablet.row, ecid, bytes: checkpoint.bytes, parts: checkpoint.parts.length },
            'checkpoint recorded',
          );
        }
      });
    }
    // Persisted when the store's copy is old enough; checked again in the mutex, so reports that queued
    // behind one write do not each write again.
    const due = (): boolean =>
      now - (tablet.meta.progress.get(ecid)?.at ?? 0) >= (this.deps.progressPersistMs ?? 5_000);
    if (!due()) return;
    const value: Progress = { ...progress, at: now };
    await tablet.mutex.run(async () => {
      if (!due()) return;
      await hosting.change(tablet, progressChange(tablet.meta, ecid, value));
    });
  }

  private async cancelStalled(stallMs: number): Promise<void> {
    const now = Date.now();
    for (const tablet of this.deps.hosting.all()) {
      if (tablet.meta.reservations.size === 0) continue;
      for (const [ecid, r] of tablet.meta.reservations) {
        const last = tablet.reported.get(ecid)?.movedAt ?? r.reservedAt;
        if (now - last > stallMs) {
          this.deps.log.warn(
            { tablet: tablet.row, ecid, compactor: r.compactor, silentMs: now - last },
            'compaction made no progress',
          );
          await this.deps
            .cancelStalled(tablet.row, ecid, `no progress for ${now - last} ms`)
            .catch(() => undefined);
        }
      }
    }
  }
}
