// Brings up the local stack (Redis Cluster on 7001-7006, NATS, MariaDB) once before the suites.
import { stackUp } from '../../deploy/local/stack.js';

export default async function setup(): Promise<void> {
  await stackUp();
}
