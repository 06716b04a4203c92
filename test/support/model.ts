/**
 * What a scan must return, computed the simple way from everything ever written: group by cell, drop
 * versions hidden by a delete at the same or a later timestamp, keep the newest `versions`.
 */
import type { ClientEntry, ExcClient, ScannedEntry } from '../../src/client/client.js';

const str = (v: Buffer | string | undefined): string => (v === undefined ? '' : v.toString());

export class DataModel {
  private readonly cells = new Map<
    string,
    { row: string; cf: string; cq: string; puts: Map<number, string>; deletes: number[] }
  >();

  write(entries: Iterable<ClientEntry>): void {
    for (const e of entries) {
      if (e.ts === undefined) throw new Error('the model needs explicit timestamps');
      const key = JSON.stringify([str(e.row), str(e.cf), str(e.cq)]);
      let cell = this.cells.get(key);
      if (!cell) {
        cell = { row: str(e.row), cf: str(e.cf), cq: str(e.cq), puts: new Map(), deletes: [] };
        this.cells.set(key, cell);
      }
      if (e.delete) cell.deletes.push(e.ts);
      else cell.puts.set(e.ts, str(e.value)); // the same key written twice: the later write wins
    }
  }

  /** Scan lines `row/cf/cq@ts=value` in key order. */
  expected(versions = 1): string[] {
    const cells = [...this.cells.values()].sort(
      (a, b) => cmp(a.row, b.row) || cmp(a.cf, b.cf) || cmp(a.cq, b.cq),
    );
    const out: string[] = [];
    for (const c of cells) {
      const newestDelete = Math.max(-1, ...c.deletes);
      const live = [...c.puts].filter(([ts]) => ts > newestDelete).sort((a, b) => b[0] - a[0]);
      for (const [ts, value] of live.slice(0, versions)) out.push(`${c.row}/${c.cf}/${c.cq}@${ts}=${value}`);
    }
    return out;
  }
}

function cmp(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}

/** `row/cf/cq@ts=value`: the model's line format. */
export const modelLine = (e: ScannedEntry): string =>
  `${e.row.toString()}/${e.cf.toString()}/${e.cq.toString()}@${e.ts}=${e.value.toString()}`;

/** `row/cf/cq=value`: for writes whose timestamps the tablet server chose. */
export const cellLine = (e: ScannedEntry): string =>
  `${e.row.toString()}/${e.cf.toString()}/${e.cq.toString()}=${e.value.toString()}`;

/** A table's scan, one line per entry (in the model's format unless told otherwise). */
export async function scanLines(
  client: ExcClient,
  table: string,
  format: (e: ScannedEntry) => string = modelLine,
): Promise<string[]> {
  const out: string[] = [];
  for await (const e of client.scan(table)) out.push(format(e));
  return out;
}
