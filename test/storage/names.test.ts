import { resolve, sep } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { checkName, checkPrefix } from '../../src/storage/index.js';
import { runs } from './arbitraries.js';
import { BAD_NAMES } from './object-store.contract.js';

describe('object names', () => {
  it('ordinary names of tablet files are accepted as they are', () => {
    for (const name of [
      'F0001.rf',
      'tables/1/t-0001/F0000abc.rf',
      'a=b+c,d@e~f_g-h.i',
      'x'.repeat(1024),
      '-',
      '0/1/2',
    ]) {
      expect(checkName(name)).toBe(name);
    }
    for (const prefix of ['', 'tables/', 'tables/1/F', 'a']) expect(checkPrefix(prefix)).toBe(prefix);
  });

  it('names that could escape the root are refused with INVALID_NAME naming them', () => {
    for (const bad of BAD_NAMES) {
      let code: unknown;
      try {
        checkName(bad);
      } catch (err) {
        code = (err as { code?: unknown }).code;
      }
      expect(code, JSON.stringify(bad)).toBe('INVALID_NAME');
    }
    expect(() => checkName(42)).toThrow(/not a string/);
    expect(() => checkName('a/../b')).toThrow('invalid object name "a/../b": ".." segment');
  });

  it('any accepted name, on any string, stays inside the root once joined to a path', () => {
    const root = resolve('/srv/store');
    fc.assert(
      fc.property(
        fc.oneof(fc.string({ unit: 'binary' }), fc.stringMatching(/^[a-z./\\%0-9]{0,12}$/)),
        (name) => {
          let ok = true;
          try {
            checkName(name);
          } catch {
            ok = false;
          }
          if (ok) {
            expect(resolve(root, ...name.split('/')).startsWith(root + sep)).toBe(true);
            expect(name).not.toMatch(/(^|\/)\.|%|\\/);
            expect([...name].every((c) => c.charCodeAt(0) >= 0x20)).toBe(true);
          }
        },
      ),
      { numRuns: runs(5000) },
    );
  });
});
