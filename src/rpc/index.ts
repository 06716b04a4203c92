export * from './auth.js';
export * from './client.js';
export * from './server.js';
export * from '../validate.js';
