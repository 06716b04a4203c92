/**
 * The file an ingested batch becomes (src/tserver/ingest-batch.ts): sorted, identical keys deduplicated
 * (the last wins), and batch order applied to the entries that share the server's stamp.
 */
import { describe, expect, it } from 'vitest';
import { formatKey, type Entry } from '../../src/storage/index.js';
import { batchFile, type BatchEntry } from '../../src/tserver/ingest-batch.js';

const TS = 1_000;

/** A put (`r=v`), a delete (`r!`); `@ts` for a writer's own timestamp. */
function e(spec: string): BatchEntry {
  const m = /^(\w+)(?:=(\w*)|(!))(?:@(\d+))?$/.exec(spec)!;
  const [, row, value, del, ts] = m;
  const entry: Entry = {
    key: {
      row: Buffer.from(row!),
      family: Buffer.from('f'),
      qualifier: Buffer.from('q'),
      timestamp: ts === undefined ? TS : Number(ts),
      deleted: del !== undefined,
    },
    value: Buffer.from(value ?? ''),
  };
  return { entry, stamped: ts === undefined };
}

const file = (...specs: string[]) =>
  batchFile(specs.map(e)).map((x) => `${formatKey(x.key)} ${x.value.toString()}`.trim());
const key = (spec: string) => formatKey(e(spec).entry.key);

describe('ingest batch', () => {
  it('batch order - a put after a delete of its cell shows: the marker goes one millisecond back', () => {
    // Newest first: the put at the stamp, then the marker below it (hiding every earlier stamp).
    expect(file('r!', 'r=v2')).toEqual([`${key('r=v2')} v2`, key('r!@999')]);
  });

  it('batch order - what comes before the last delete of its cell is not written', () => {
    expect(file('r=v1', 'r!')).toEqual([key('r!')]);
    expect(file('r=v1', 'r!', 'r=v2', 'r!', 'r=v3', 's=x')).toEqual([
      `${key('r=v3')} v3`,
      key('r!@999'),
      `${key('s=x')} x`,
    ]);
    // Other cells are not touched.
    expect(file('s=x', 'r!')).toEqual([key('r!'), `${key('s=x')} x`]);
  });

  it('identical keys - the last one in the batch wins', () => {
    expect(file('r=a', 'r=b')).toEqual([`${key('r=b')} b`]);
    expect(file('r=a@5', 'r=b@5')).toEqual([`${key('r=b@5')} b`]);
  });

  it("writer's timestamps - kept, their order is theirs", () => {
    // A delete of the writer's at 5 and a put of the writer's at 5: the marker hides the put, as documented.
    expect(file('r!@5', 'r=a@5')).toEqual([key('r!@5'), `${key('r=a@5')} a`]);
    // A stamped delete does not drop an entry with the writer's timestamp before it in the batch.
    expect(file('r=a@5', 'r!')).toEqual([key('r!'), `${key('r=a@5')} a`]);
  });
});
