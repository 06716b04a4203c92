/**
 * A table's iterators, changed one at a time (`excompact admin table iterator add|remove`; DESIGN.md,
 * "Table iterators"):
 *
 *   POST /v1/tables/:name/iterators?requestId=   {"add": {"name": .., "type": .., ...options}}
 *                                                {"remove": "<name>"}
 *
 * Each change is made to the iterators as committed, inside the table's conditional configuration write
 * (Tables.configure): two operators adding at once both land, a name is refused when the table already
 * has it, a remove of a name it lacks is NOT_FOUND, and a refused change changes nothing. The answer is
 * the table, configured.
 */
import { z } from 'zod';
import { ExcError } from '../errors.js';
import { nameSchema } from '../names.js';
import type { RpcServer } from '../rpc/server.js';
import { validateTableIterators } from '../table-iterators.js';
import { parseInput } from '../validate.js';
import type { AdminParts } from './admin-api.js';
import { requestIdOf } from './requests.js';

const change = z.union([
  z.strictObject({ add: z.record(z.string(), z.unknown()) }),
  z.strictObject({ remove: z.string().min(1).max(64) }),
]);

export function registerIteratorApi(server: RpcServer, parts: () => AdminParts): void {
  server.route('POST', '/tables/:name/iterators', { body: change }, async ({ params, body, query }) => {
    const { name } = parseInput(z.object({ name: nameSchema('table') }), params, 'path');
    const p = parts();
    const table = await p.tables.configure(
      name,
      ({ iterators }) => {
        if ('add' in body) {
          const [added] = validateTableIterators([body.add]);
          if (iterators.some((i) => i.name === added!.name))
            throw new ExcError('CONFLICT', `table ${name} already has an iterator named ${added!.name}`);
          return { iterators: [...iterators, added!] };
        }
        if (!iterators.some((i) => i.name === body.remove))
          throw new ExcError('NOT_FOUND', `table ${name} has no iterator named ${body.remove}`);
        return { iterators: iterators.filter((i) => i.name !== body.remove) };
      },
      requestIdOf(query),
    );
    p.notifyTservers({ tableId: table.id });
    return table;
  });
}
