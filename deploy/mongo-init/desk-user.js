// The desk's own MongoDB user, made once, when the mongo service first starts on an empty volume
// (docker-compose.yml mounts this directory as /docker-entrypoint-initdb.d). Least privilege: read and
// write on the desk's database alone; the root user (MONGO_INITDB_ROOT_*) stays for backups and repairs.
// On a volume made before this file existed, run it by hand: docs/operations.md, "MongoDB's users".
const database = process.env.MONGODB_DB || "desk";
const password = process.env.MONGO_DESK_PASSWORD;
if (!password) {
  throw new Error("MONGO_DESK_PASSWORD is not set: the desk's database user needs a password (.env.example)");
}
db.getSiblingDB(database).createUser({
  user: "desk",
  pwd: password,
  roles: [{ role: "readWrite", db: database }],
});
