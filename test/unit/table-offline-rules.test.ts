/**
 * The rule a tablet server applies when it loads a tablet of a table that was offline
 * (src/tserver/table-offline.ts): reservations made before the table came back online are cut off.
 * Real processes take a table offline and back in test/cluster/table-offline.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { tabletRow } from '../../src/meta/keys.js';
import { parseTablet, type Reservation } from '../../src/meta/tablet.js';
import { cutOff } from '../../src/tserver/table-offline.js';

function reservation(reservedAt: number): Reservation {
  return {
    compactor: '/c/1',
    queueId: '0001',
    inputs: ['f'],
    output: `o${reservedAt}`,
    kind: 'system',
    attempt: 0,
    reservedAt,
    allFiles: true,
  } as Reservation;
}

describe('offline cut-off', () => {
  it('cancels exactly the reservations made before the table was last brought online', () => {
    const meta = parseTablet(tabletRow('0001', null), new Map([['prev', 'null']]));
    meta.reservations.set('OLD', reservation(1_000));
    meta.reservations.set('EDGE', reservation(1_999));
    meta.reservations.set('NEW', reservation(2_000));
    meta.reservations.set('NEWER', reservation(5_000));
    expect(cutOff(meta, 2_000)).toEqual(['OLD', 'EDGE']);
    // A table never taken offline cuts nothing off.
    expect(cutOff(meta, undefined)).toEqual([]);
  });
});
