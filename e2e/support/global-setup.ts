// One shared server for the tests that do not need their own: started on a fresh database,
// stopped when the run ends.
import { freshDatabaseName, startServer, stopServer } from './server';

export default async function globalSetup() {
  const server = await startServer({ port: 3901, database: freshDatabaseName() });
  process.env.ONCE_E2E_BASE_URL = server.baseURL;
  return async () => stopServer(server);
}
