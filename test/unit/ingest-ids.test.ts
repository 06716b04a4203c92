/**
 * The ingest request ids a tablet remembers (src/meta/tablet.ts): kept oldest first, so that a busy
 * tablet's ingest finds the expired ones without visiting the tens of thousands it remembers, and left
 * out of change previews, which every ingest made.
 */
import { describe, expect, it } from 'vitest';
import { expiredIngests, INGEST_DEDUPE_MS } from '../../src/meta/ingest-ids.js';
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
    const ingests = new Map<string, number>();
    for (let i = 0; i < 50_000; i++) ingests.set(`id${i}`, NOW - INGEST_DEDUPE_MS - 100 + i);
    // Exactly the window old is still remembered.
    expect(expiredIngests(ingests, NOW)).toEqual(Array.from({ length: 100 }, (_, i) => `id${i}`));
    expect(expiredIngests(ingests, NOW - 200)).toEqual([]);
    // A clock that stepped back: an old id behind a newer one is forgotten later, never a new one sooner.
    const stepped = new Map([
      ['new', NOW],
      ['old', 0],
    ]);
    expect(expiredIngests(stepped, NOW)).toEqual([]);
  });

  it('a preview leaves the ids out, and a change applied to it does not touch the tablet', () => {
    const meta = parseTablet('0001<', new Map([['prev', 'null']]));
    meta.ingests.set('kept', NOW);
    const t = new HostedTablet(meta, { server: 'ts:1', session: '00000000000000aa' });
    const p = preview(t, {
      apply: (m) => {
        m.ingests.set('added', NOW + 1);
        m.ingests.delete('kept');
        m.files.set('f', { size: 1, entries: 1 });
      },
    });
    expect(p.files.has('f')).toBe(true);
    expect([...t.meta.ingests.keys()]).toEqual(['kept']);
    expect(t.meta.files.size).toBe(0);
  });
});
