/**
 * One {@link RpcClient} per peer address (tablet servers, the manager), sharing the process's keep-alive
 * connection pool.
 */
import type { Logger } from '../log.js';
import { RpcClient, type RpcClientOptions } from './client.js';

export class PeerClients {
  private readonly clients = new Map<string, RpcClient>();

  constructor(private readonly options: Omit<RpcClientOptions, 'baseUrl'> & { logger?: Logger }) {}

  /** The client for `host:port` (or a full http:// URL). */
  get(address: string): RpcClient {
    let client = this.clients.get(address);
    if (!client) {
      client = new RpcClient({
        ...this.options,
        baseUrl: address.startsWith('http') ? address : `http://${address}`,
      });
      this.clients.set(address, client);
    }
    return client;
  }
}
