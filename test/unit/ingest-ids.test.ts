/**
 * The ingest request ids a tablet remembers (src/meta/tablet.ts): kept oldest first, so that a busy
 * tablet's ingest finds the expired ones without visiting the tens of thousands it remembers, and left
 * out of change previews, which every ingest made.
 */
import { describe, expect, it } from 'vitest';
import {
  expiredIngests,
  INGEST_DEDUPE_MS,
  ingestRecordValue,
  parseIngestRecord,
  recordApplied,
  rowApplied,
} from '../../src/meta/ingest-ids.js';
import { tabletRows } from '../../src/meta/rows.js';
import { parseTablet } from '../../src/meta/tablet.js';
import { HostedTablet } from '../../src/tserver/hosted-tablet.js';
import { preview } from '../../src/tserver/tablet-change.js';

const NOW = 10 * INGEST_DEDUPE_MS;

describe('ingest ids', () => {
  it('a tablet read from its row keeps them by time, whatever the order of their columns', () => {
    const t = parseTablet(
      '0001<',
      new Map([
        ['prev', 'null'],
        ['ingest:a', String(NOW - 10)],
        ['ingest:b', String(NOW - INGEST_DEDUPE_MS - 5)],
        ['ingest:c', String(NOW)],
        ['ingest:d', String(NOW - INGEST_DEDUPE_MS - 50)],
      ]),
    );
    expect([...t.ingests.keys()]).toEqual(['d', 'b', 'a', 'c']);
    expect(expiredIngests(t.ingests, NOW)).toEqual(['d', 'b']);
  });

  it('only ids older than the window expire, and the scan stops at the first one that is not', () => {
    const ingests = new Map<string, { at: number }>();
    for (let i = 0; i < 50_000; i++) ingests.set(`id${i}`, { at: NOW - INGEST_DEDUPE_MS - 100 + i });
    // Exactly the window old is still remembered.
    expect(expiredIngests(ingests, NOW)).toEqual(Array.from({ length: 100 }, (_, i) => `id${i}`));
    expect(expiredIngests(ingests, NOW - 200)).toEqual([]);
    // A clock that stepped back: an old id behind a newer one is forgotten later, never a new one sooner.
    const stepped = new Map([
      ['new', { at: NOW }],
      ['old', { at: 0 }],
    ]);
    expect(expiredIngests(stepped, NOW)).toEqual([]);
  });

  it('a preview leaves the ids out, and a change applied to it does not touch the tablet', () => {
    const meta = parseTablet('0001<', new Map([['prev', 'null']]));
    meta.ingests.set('kept', { at: NOW });
    const t = new HostedTablet(meta, { server: 'ts:1', session: '00000000000000aa' });
    const p = preview(t, {
      apply: (m) => {
        m.ingests.set('added', { at: NOW + 1 });
        m.ingests.delete('kept');
        m.files.set('f', { size: 1, entries: 1 });
      },
    });
    expect(p.files.has('f')).toBe(true);
    expect([...t.meta.ingests.keys()]).toEqual(['kept']);
    expect(t.meta.files.size).toBe(0);
  });

  it('a piece of a batch records its rows within the tablet, and only their entries count as applied', () => {
    const b = (t: string) => Buffer.from(t);
    // The tablet holds (f, p]; the piece was cut to (c, k] for a tablet that has split since.
    const tablet = tabletRows(b('f'), b('p'));
    const piece = tabletRows(b('c'), b('k'));
    const once = recordApplied(undefined, piece, tablet, NOW);
    expect(once.rows).toEqual([tabletRows(b('f'), b('k'))]);
    expect(rowApplied(once, b('g'))).toBe(true);
    expect(rowApplied(once, b('k'))).toBe(true);
    expect(rowApplied(once, b('ka'))).toBe(false);
    expect(rowApplied(once, b('f'))).toBe(false); // not the tablet's row: never applied here
    // A second piece adds its rows; the whole batch sent again skips both and applies the rest.
    const twice = recordApplied(once, tabletRows(b('k'), b('z')), tablet, NOW + 5);
    expect(twice.at).toBe(NOW);
    expect(rowApplied(twice, b('n'))).toBe(true);
    expect(rowApplied(twice, b('q'))).toBe(false);
    // Stored and read back the same; a whole batch is just its time, as before pieces existed.
    expect(parseIngestRecord(ingestRecordValue(twice))).toEqual(twice);
    const whole = recordApplied(undefined, undefined, tablet, NOW);
    expect(ingestRecordValue(whole)).toBe(String(NOW));
    expect(rowApplied(parseIngestRecord(String(NOW)), b('anything'))).toBe(true);
    // A value that does not parse is taken as the whole batch: never applied twice.
    expect(rowApplied(parseIngestRecord('{garbled'), b('a'))).toBe(true);
  });
});
