// One shared server and the sandbox provider for the tests that do not need their own:
// each on a fresh database, stopped when the run ends, when every database of the run is
// dropped.
import {
  dropRunDatabases,
  fingerprintSecret,
  freshDatabaseName,
  startProvider,
  runTag,
  startServer,
  stopServer,
  webhookSecret,
} from './server';

export default async function globalSetup() {
  // Generated here, before any worker starts, so that the workers inherit it.
  webhookSecret();
  fingerprintSecret();
  runTag();
  const port = 3901;
  const provider = await startProvider(
    freshDatabaseName('once_provider_e2e'),
    `http://127.0.0.1:${port}/webhooks/provider`,
  );
  const server = await startServer({ port, database: freshDatabaseName() }).catch(async (e) => {
    // No teardown runs when the setup fails: the run's databases are dropped here.
    await stopServer(provider);
    dropRunDatabases();
    throw e;
  });
  process.env.ONCE_E2E_BASE_URL = server.baseURL;
  process.env.ONCE_E2E_PROVIDER_URL = provider.baseURL;
  return async () => {
    await stopServer(server);
    await stopServer(provider);
    dropRunDatabases();
  };
}
