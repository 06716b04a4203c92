/**
 * Which tablet of a table holds a row, as the client knows the table's tablets (their views from the
 * manager): pure, shared by ingest, scan and bulk import.
 */
import { tabletRows, type HexRange } from '../meta/rows.js';
import type { TabletView } from '../meta/views.js';
import { ExcError } from '../errors.js';

export function rowsOfView(t: TabletView): HexRange {
  const bytes = (h: string | null) => (h === null ? null : Buffer.from(h, 'hex'));
  return tabletRows(bytes(t.prevEndRowHex), bytes(t.endRowHex));
}

/**
 * The tablet holding the first row of a scan: the first row after `after` (exclusive), or else `start`
 * (inclusive), or else the table's first row.
 */
export function tabletFor(
  tablets: readonly TabletView[],
  after: Buffer | undefined,
  start: Buffer | undefined,
): TabletView | undefined {
  return tablets.find((t) => {
    if (t.endRowHex === null) return true;
    const endRow = Buffer.from(t.endRowHex, 'hex');
    if (after) return Buffer.compare(endRow, after) > 0;
    return !start || Buffer.compare(endRow, start) >= 0;
  });
}

/** Which tablet holds a row: the first whose range (prev, end] does. End rows are decoded once. */
export function router(tablets: readonly TabletView[]): (row: Buffer) => string {
  const ends = tablets.map((t) => ({
    tablet: t.tablet,
    end: t.endRowHex === null ? null : Buffer.from(t.endRowHex, 'hex'),
  }));
  return (row) => {
    const found = ends.find((t) => t.end === null || Buffer.compare(row, t.end) <= 0);
    if (!found) throw new ExcError('INTERNAL', 'table has no last tablet');
    return found.tablet;
  };
}
