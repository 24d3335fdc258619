//! Users and their privileges, kept in the cluster so that every SQL
//! node sees the same (docs/design/0031-users-and-grants.md):
//!
//! - `tessera$users`, keyed by (user, host pattern): the auth plugin and
//!   what it stores (never the password: SHA1(SHA1(p)) for
//!   mysql_native_password, a salted SHA-256 crypt for
//!   caching_sha2_password, as MySQL stores them);
//! - `tessera$grants`, keyed by (user, host pattern, database, table):
//!   the privileges granted there (`*` for every database or table).
//!
//! The account statements (CREATE USER, DROP USER, ALTER USER, GRANT,
//! REVOKE, SHOW GRANTS) are parsed here: the `sqlparser` crate reads
//! other dialects' forms of them.

use crate::error::{codes, SqlError, SqlResult};
use crate::result::Response;
use crate::value::Value;
use client::{
    Access, Cluster, ColumnDef, ColumnType, Commit, KeyRange, LockMode, ScanOptions, Table,
    TableDef,
};
use std::net::IpAddr;
use std::ops::Bound;
use std::sync::Arc;

/// The system table of accounts.
pub const USERS: &str = "tessera$users";
/// The system table of granted privileges.
pub const GRANTS: &str = "tessera$grants";

/// Longest user name (MySQL's 32).
const MAX_USER: u16 = 32;
/// Longest host pattern (MySQL's 255).
const MAX_HOST: u16 = 255;

/// The definitions of the two system tables.
pub fn system_tables() -> Vec<TableDef> {
    let text = |name: &str, n| ColumnDef::new(name, ColumnType::VarChar(n), false);
    vec![
        TableDef {
            name: USERS.into(),
            columns: vec![
                text("user", MAX_USER),
                text("host", MAX_HOST),
                text("plugin", 64),
                ColumnDef::new("authentication", ColumnType::VarBinary(128), false),
            ],
            primary_key: vec![0, 1],
            ..crate::catalog::empty_def()
        },
        TableDef {
            name: GRANTS.into(),
            columns: vec![
                text("user", MAX_USER),
                text("host", MAX_HOST),
                text("db", 64),
                text("tbl", 64),
                ColumnDef::new("privileges", ColumnType::Int { unsigned: true }, false),
            ],
            primary_key: vec![0, 1, 2, 3],
            ..crate::catalog::empty_def()
        },
    ]
}

/// A set of privileges.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Privileges(pub u32);

impl Privileges {
    /// SELECT.
    pub const SELECT: Privileges = Privileges(1);
    /// INSERT.
    pub const INSERT: Privileges = Privileges(2);
    /// UPDATE.
    pub const UPDATE: Privileges = Privileges(4);
    /// DELETE.
    pub const DELETE: Privileges = Privileges(8);
    /// CREATE (databases and tables).
    pub const CREATE: Privileges = Privileges(16);
    /// DROP (and TRUNCATE).
    pub const DROP: Privileges = Privileges(32);
    /// INDEX: CREATE INDEX and DROP INDEX.
    pub const INDEX: Privileges = Privileges(64);
    /// ALTER.
    pub const ALTER: Privileges = Privileges(128);
    /// CREATE USER (global only): create, drop and alter accounts.
    pub const CREATE_USER: Privileges = Privileges(256);
    /// GRANT OPTION: give the privileges one holds.
    pub const GRANT_OPTION: Privileges = Privileges(512);
    /// ALL [PRIVILEGES] at a database or table.
    pub const ALL_OBJECT: Privileges = Privileges(255);
    /// Everything (ALL ON *.* WITH GRANT OPTION: root's).
    pub const EVERYTHING: Privileges = Privileges(1023);

    const NAMES: [(Privileges, &'static str); 9] = [
        (Privileges::SELECT, "SELECT"),
        (Privileges::INSERT, "INSERT"),
        (Privileges::UPDATE, "UPDATE"),
        (Privileges::DELETE, "DELETE"),
        (Privileges::CREATE, "CREATE"),
        (Privileges::DROP, "DROP"),
        (Privileges::INDEX, "INDEX"),
        (Privileges::ALTER, "ALTER"),
        (Privileges::CREATE_USER, "CREATE USER"),
    ];

    /// Whether every privilege of `other` is in `self`.
    pub fn contains(self, other: Privileges) -> bool {
        self.0 & other.0 == other.0
    }

    /// Both sets.
    pub fn union(self, other: Privileges) -> Privileges {
        Privileges(self.0 | other.0)
    }

    /// `self` without `other`.
    pub fn without(self, other: Privileges) -> Privileges {
        Privileges(self.0 & !other.0)
    }

    /// Whether it is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The privilege a word names.
    fn named(word: &str) -> Option<Privileges> {
        Privileges::NAMES
            .iter()
            .find(|(_, name)| name.eq_ignore_ascii_case(word))
            .map(|(privilege, _)| *privilege)
    }

    /// As SHOW GRANTS lists them at a level (`ALL PRIVILEGES` when every
    /// one of the level is there).
    fn describe(self, global: bool) -> String {
        let all = match global {
            true => Privileges::ALL_OBJECT.union(Privileges::CREATE_USER),
            false => Privileges::ALL_OBJECT,
        };
        let granted = self.without(Privileges::GRANT_OPTION);
        if granted.contains(all) {
            return "ALL PRIVILEGES".into();
        }
        let names: Vec<&str> = Privileges::NAMES
            .iter()
            .filter(|(privilege, _)| granted.contains(*privilege))
            .map(|(_, name)| *name)
            .collect();
        match names.is_empty() {
            true => "USAGE".into(),
            false => names.join(", "),
        }
    }
}

/// The auth plugin of an account.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plugin {
    /// mysql_native_password: SHA1(SHA1(password)) stored.
    Native,
    /// caching_sha2_password: a salted SHA-256 crypt stored (MySQL 8's
    /// default).
    CachingSha2,
}

impl Plugin {
    /// Its name on the wire and in statements.
    pub fn name(self) -> &'static str {
        match self {
            Plugin::Native => "mysql_native_password",
            Plugin::CachingSha2 => "caching_sha2_password",
        }
    }

    fn named(name: &str) -> Option<Plugin> {
        [Plugin::Native, Plugin::CachingSha2]
            .into_iter()
            .find(|plugin| plugin.name().eq_ignore_ascii_case(name))
    }

    /// What the account stores for `password` (empty for no password).
    fn store(self, password: &str) -> Vec<u8> {
        if password.is_empty() {
            return Vec::new();
        }
        match self {
            Plugin::Native => {
                mysql_protocol::auth::native_password_stage2(password.as_bytes()).to_vec()
            }
            Plugin::CachingSha2 => {
                let salt = mysql_protocol::auth::crypt_salt(&random_bytes());
                mysql_protocol::auth::caching_sha2_stored(password.as_bytes(), &salt).into_bytes()
            }
        }
    }
}

/// 20 bytes from the operating system's random source.
fn random_bytes() -> [u8; 20] {
    let mut bytes = [0u8; 20];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut file| std::io::Read::read_exact(&mut file, &mut bytes))
        .expect("the SQL node reads /dev/urandom for password salts");
    bytes
}

/// An account: a user name and the hosts it may connect from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Account {
    /// The user name.
    pub user: String,
    /// The host pattern (`%` any, `_` any one character).
    pub host: String,
    /// Its plugin.
    pub plugin: Plugin,
    /// What the plugin stores (empty: no password).
    pub authentication: Vec<u8>,
}

impl Account {
    /// The account `root`@`localhost` of a cluster no one has given a
    /// password: no password, from loopback only.
    pub fn built_in_root() -> Account {
        Account {
            user: "root".into(),
            host: "localhost".into(),
            plugin: Plugin::Native,
            authentication: Vec::new(),
        }
    }

    /// Whether it is root's: every privilege, whatever the grants say.
    pub fn is_root(&self) -> bool {
        self.user == "root" && self.host == "localhost"
    }

    /// `'user'@'host'`, as messages name it.
    pub fn quoted(&self) -> String {
        format!("'{}'@'{}'", self.user, self.host)
    }
}

/// Statement text as SHOW PROCESSLIST shows it: an account statement's
/// passwords are not shown.
pub fn masked(text: &str) -> String {
    match parse(text) {
        Some(_) if text.to_ascii_uppercase().contains("IDENTIFIED") => {
            let upper = text.to_ascii_uppercase();
            let cut = upper.find("IDENTIFIED").unwrap_or(text.len());
            format!("{}IDENTIFIED BY <secret>", &text[..cut])
        }
        _ => text.to_string(),
    }
}

/// The names an address is known by for host patterns: its text, and
/// `localhost` for a loopback address.
fn host_names(address: IpAddr) -> Vec<String> {
    let mut names = vec![address.to_string()];
    if let IpAddr::V6(v6) = address {
        if let Some(v4) = v6.to_ipv4_mapped() {
            names.push(v4.to_string());
        }
    }
    if address.is_loopback() || names.iter().any(|n| n.starts_with("127.")) {
        names.push("localhost".into());
    }
    names
}

/// How specific a host pattern is: literal hosts first, then patterns by
/// how many characters they fix, `%` last (MySQL's order).
fn specificity(host: &str) -> (bool, std::cmp::Reverse<usize>) {
    let wild = host.contains(['%', '_']);
    let fixed = host.chars().filter(|c| *c != '%' && *c != '_').count();
    (wild, std::cmp::Reverse(fixed))
}

fn text(value: &client::Value) -> String {
    String::from_utf8_lossy(value.as_bytes().unwrap_or_default()).into_owned()
}

fn refused(table: &str) -> impl Fn(client::ClientError) -> SqlError + '_ {
    move |error| SqlError::from_client(&error, table)
}

/// caching_sha2_password's cache on one SQL node: for an account, the
/// SHA256(SHA256(password)) its last full authentication here proved,
/// which lets its next logins take the fast path (a scramble, no
/// password sent). An entry is void once the account's stored hash is
/// not the one it was proved against (a password changed on any SQL
/// node: every login reads the account from the cluster).
#[derive(Default)]
pub struct FastAuthCache {
    entries: std::sync::Mutex<std::collections::HashMap<(String, String), Proved>>,
}

/// A password's double SHA-256, and the stored hash it was proved
/// against.
type Proved = ([u8; 32], Vec<u8>);

impl FastAuthCache {
    /// Remembers that `account`'s password has `proof` as its double
    /// SHA-256.
    pub fn remember(&self, account: &Account, proof: [u8; 32]) {
        let key = (account.user.clone(), account.host.clone());
        self.entries
            .lock()
            .expect("fast auth cache lock")
            .insert(key, (proof, account.authentication.clone()));
    }

    /// The proof remembered for `account`, if still valid.
    pub fn proof(&self, account: &Account) -> Option<[u8; 32]> {
        let key = (account.user.clone(), account.host.clone());
        self.entries
            .lock()
            .expect("fast auth cache lock")
            .get(&key)
            .filter(|(_, proved_against)| *proved_against == account.authentication)
            .map(|(proof, _)| *proof)
    }
}

/// The accounts and grants in the cluster.
pub struct Accounts {
    cluster: &'static Cluster,
}

impl Accounts {
    /// Over `cluster`, whose system tables exist.
    pub fn new(cluster: &'static Cluster) -> Accounts {
        Accounts { cluster }
    }

    fn table(&self, name: &str) -> SqlResult<Arc<Table>> {
        self.cluster.table(name).map_err(refused(name))
    }

    /// Rows of `table` whose key starts with `prefix`.
    fn rows(&self, table: &str, prefix: Vec<client::Value>) -> SqlResult<Vec<Vec<client::Value>>> {
        let handle = self.table(table)?;
        let range = [KeyRange {
            low: Bound::Included(prefix.clone()),
            high: Bound::Included(prefix),
        }];
        let result = self
            .cluster
            .scan(&handle, Access::PrimaryKey(&range), &ScanOptions::default())
            .map_err(refused(table))?;
        Ok(result
            .rows
            .into_iter()
            .map(client::Row::into_values)
            .collect())
    }

    /// The accounts named `user`, most specific host first.
    fn accounts_named(&self, user: &str) -> SqlResult<Vec<Account>> {
        let mut accounts: Vec<Account> = self
            .rows(USERS, vec![client::Value::from(user)])?
            .into_iter()
            .filter_map(|row| {
                Some(Account {
                    user: text(&row[0]),
                    host: text(&row[1]),
                    plugin: Plugin::named(&text(&row[2]))?,
                    authentication: row[3].as_bytes()?.to_vec(),
                })
            })
            .collect();
        accounts.sort_by_key(|account| specificity(&account.host));
        Ok(accounts)
    }

    /// The account `user` connecting from `address` logs in as: the most
    /// specific host pattern that matches; root from loopback with no
    /// account of its own is the built-in one. `None`: no account.
    pub fn find(&self, user: &str, address: IpAddr) -> SqlResult<Option<Account>> {
        let names = host_names(address);
        let found = self.accounts_named(user)?.into_iter().find(|account| {
            let pattern = account.host.to_ascii_lowercase();
            names
                .iter()
                .any(|name| crate::expr::like(name.as_bytes(), pattern.as_bytes()))
        });
        Ok(match found {
            Some(account) => Some(account),
            None if user == "root" && address.is_loopback() => {
                // `root`@`localhost` is built in until it is stored (ALTER
                // USER gives it a password); it cannot be dropped, so a
                // stored one never gives way to the built-in again.
                Some(Account::built_in_root())
            }
            None => None,
        })
    }

    /// The account `user`@`host` exactly.
    fn account(&self, user: &str, host: &str) -> SqlResult<Option<Account>> {
        Ok(self
            .accounts_named(user)?
            .into_iter()
            .find(|account| account.host.eq_ignore_ascii_case(host)))
    }

    /// The privileges granted to `account`.
    pub fn grants(&self, account: &Account) -> SqlResult<Grants> {
        if account.is_root() {
            return Ok(Grants {
                entries: vec![Grant {
                    database: "*".into(),
                    table: "*".into(),
                    privileges: Privileges::EVERYTHING,
                }],
            });
        }
        let prefix = vec![
            client::Value::from(account.user.as_str()),
            client::Value::from(account.host.as_str()),
        ];
        let entries = self
            .rows(GRANTS, prefix)?
            .into_iter()
            .map(|row| Grant {
                database: text(&row[2]),
                table: text(&row[3]),
                privileges: Privileges(row[4].as_u64().unwrap_or(0) as u32),
            })
            .collect();
        Ok(Grants { entries })
    }

    /// Runs an account statement for `current` (whose grants are
    /// `granted`).
    pub fn run(
        &self,
        statement: &Statement,
        current: &Account,
        granted: &Grants,
        database: Option<&str>,
    ) -> SqlResult<Response> {
        let administer = || {
            if granted.allows("*", "*", Privileges::CREATE_USER) {
                Ok(())
            } else {
                Err(SqlError::new(
                    1227,
                    "Access denied; you need (at least one of) the CREATE USER privilege(s) for this operation",
                ))
            }
        };
        match statement {
            Statement::CreateUser {
                if_not_exists,
                users,
            } => {
                administer()?;
                for (user, identified) in users {
                    let plugin = identified.plugin.unwrap_or(Plugin::CachingSha2);
                    let password = identified.password.as_deref().unwrap_or("");
                    self.create(user, plugin, password, *if_not_exists)?;
                }
                Ok(Response::ok())
            }
            Statement::DropUser { if_exists, users } => {
                administer()?;
                if users
                    .iter()
                    .any(|user| user.user == "root" && user.host == "localhost" && !user.current)
                {
                    // Without it root would be the built-in account again,
                    // which has no password.
                    return Err(SqlError::new(
                        1396,
                        "Operation DROP USER failed for 'root'@'localhost': it is the administrator; give it a new password instead (ALTER USER)",
                    ));
                }
                for user in users {
                    self.drop(user, *if_exists)?;
                }
                Ok(Response::ok())
            }
            Statement::AlterUser {
                if_exists,
                user,
                identified,
            } => {
                let user = user.resolve(current);
                // Anyone may change their own password.
                if !(user.user == current.user && user.host == current.host) {
                    administer()?;
                }
                self.alter(&user, identified, *if_exists)
            }
            Statement::Grant {
                privileges,
                on,
                users,
                grant_option,
            } => {
                let (db, table) = on.resolve(database)?;
                let mut wanted = *privileges;
                if *grant_option {
                    wanted = wanted.union(Privileges::GRANT_OPTION);
                }
                let mine = granted.at(&db, &table);
                if !mine.contains(Privileges::GRANT_OPTION)
                    || !mine.contains(wanted.without(Privileges::GRANT_OPTION))
                {
                    return Err(SqlError::new(
                        codes::ACCESS_DENIED_FOR_DB,
                        format!(
                            "Access denied for user {} to grant these privileges on {db}.{table}",
                            current.quoted()
                        ),
                    ));
                }
                for user in users {
                    let user = user.resolve(current);
                    if self.account(&user.user, &user.host)?.is_none() {
                        return Err(SqlError::new(
                            1410,
                            format!("You are not allowed to create a user with GRANT ({} does not exist)", user.quoted()),
                        ));
                    }
                    self.change_grant(&user, &db, &table, |held| held.union(wanted))?;
                }
                Ok(Response::ok())
            }
            Statement::Revoke {
                privileges,
                on,
                users,
            } => {
                let (db, table) = on.resolve(database)?;
                if !granted.at(&db, &table).contains(Privileges::GRANT_OPTION) {
                    return Err(SqlError::new(
                        codes::ACCESS_DENIED_FOR_DB,
                        format!(
                            "Access denied for user {} to revoke on {db}.{table}",
                            current.quoted()
                        ),
                    ));
                }
                for user in users {
                    let user = user.resolve(current);
                    let held = self.grant_row(&user, &db, &table)?;
                    if held.is_none() {
                        return Err(SqlError::new(
                            1141,
                            format!(
                                "There is no such grant defined for user '{}' on host '{}'",
                                user.user, user.host
                            ),
                        ));
                    }
                    self.change_grant(&user, &db, &table, |held| held.without(*privileges))?;
                }
                Ok(Response::ok())
            }
            Statement::ShowGrants { user } => {
                let account = match user {
                    None => current.clone(),
                    Some(user) => {
                        let user = user.resolve(current);
                        let own = user.user == current.user && user.host == current.host;
                        if !own && !granted.allows("*", "*", Privileges::SELECT) {
                            return Err(SqlError::new(
                                codes::ACCESS_DENIED_FOR_DB,
                                format!(
                                    "Access denied for user {} to the grants of others",
                                    current.quoted()
                                ),
                            ));
                        }
                        match self.account(&user.user, &user.host)? {
                            Some(account) => account,
                            None if user.user == "root" && user.host == "localhost" => {
                                Account::built_in_root()
                            }
                            None => {
                                return Err(SqlError::new(
                                    1141,
                                    format!(
                                        "There is no such grant defined for user '{}' on host '{}'",
                                        user.user, user.host
                                    ),
                                ))
                            }
                        }
                    }
                };
                let grants = self.grants(&account)?;
                let name = format!("Grants for {}@{}", account.user, account.host);
                let rows = grants
                    .show(&account)
                    .into_iter()
                    .map(|line| vec![Value::from(line)])
                    .collect();
                Ok(Response::text_rows(&[name.as_str()], rows))
            }
        }
    }

    fn create(
        &self,
        user: &UserName,
        plugin: Plugin,
        password: &str,
        if_not_exists: bool,
    ) -> SqlResult<()> {
        check_user_name(user)?;
        let table = self.table(USERS)?;
        let mut transaction = self.cluster.transaction();
        let row = [
            ("user", client::Value::from(user.user.as_str())),
            ("host", client::Value::from(user.host.as_str())),
            ("plugin", client::Value::from(plugin.name())),
            (
                "authentication",
                client::Value::Bytes(plugin.store(password)),
            ),
        ];
        transaction.insert(&table, &row).map_err(refused(USERS))?;
        match transaction.execute(Commit::Yes) {
            Ok(_) => Ok(()),
            Err(error) if error.code() == Some(client::ErrorCode::DuplicateKey) => {
                match if_not_exists {
                    true => Ok(()),
                    false => Err(operation_failed("CREATE USER", user)),
                }
            }
            Err(error) => Err(refused(USERS)(error)),
        }
    }

    fn drop(&self, user: &UserName, if_exists: bool) -> SqlResult<()> {
        let key = [
            client::Value::from(user.user.as_str()),
            client::Value::from(user.host.as_str()),
        ];
        // Its grants first: an account left without them is harmless, a
        // grant left without its account would be given to the next
        // account of that name.
        let grants = self.table(GRANTS)?;
        for row in self.rows(GRANTS, key.to_vec())? {
            let mut transaction = self.cluster.transaction();
            transaction
                .delete(&grants, &row[..4])
                .map_err(refused(GRANTS))?;
            match transaction.execute(Commit::Yes) {
                Ok(_) => {}
                Err(error) if error.code() == Some(client::ErrorCode::NoSuchRow) => {}
                Err(error) => return Err(refused(GRANTS)(error)),
            }
        }
        let users = self.table(USERS)?;
        let mut transaction = self.cluster.transaction();
        transaction.delete(&users, &key).map_err(refused(USERS))?;
        match transaction.execute(Commit::Yes) {
            Ok(_) => Ok(()),
            Err(error) if error.code() == Some(client::ErrorCode::NoSuchRow) => match if_exists {
                true => Ok(()),
                false => Err(operation_failed("DROP USER", user)),
            },
            Err(error) => Err(refused(USERS)(error)),
        }
    }

    fn alter(
        &self,
        user: &UserName,
        identified: &Identified,
        if_exists: bool,
    ) -> SqlResult<Response> {
        let existing = self.account(&user.user, &user.host)?;
        let root = user.user == "root" && user.host == "localhost";
        let plugin = match (&existing, identified.plugin) {
            (_, Some(plugin)) => plugin,
            (Some(account), None) => account.plugin,
            (None, None) => Plugin::CachingSha2,
        };
        let password = identified.password.as_deref().unwrap_or("");
        match existing {
            Some(_) => {}
            // The built-in root gets an account of its own.
            None if root => {
                self.create(user, plugin, password, false)?;
                return Ok(Response::ok());
            }
            None if if_exists => return Ok(Response::ok()),
            None => return Err(operation_failed("ALTER USER", user)),
        }
        let table = self.table(USERS)?;
        let mut transaction = self.cluster.transaction();
        let key = [
            client::Value::from(user.user.as_str()),
            client::Value::from(user.host.as_str()),
        ];
        let set = [
            ("plugin", client::Value::from(plugin.name())),
            (
                "authentication",
                client::Value::Bytes(plugin.store(password)),
            ),
        ];
        transaction
            .update(&table, &key, &set)
            .map_err(refused(USERS))?;
        transaction.execute(Commit::Yes).map_err(refused(USERS))?;
        Ok(Response::ok())
    }

    fn grant_row(&self, user: &UserName, db: &str, table: &str) -> SqlResult<Option<Privileges>> {
        let handle = self.table(GRANTS)?;
        let mut transaction = self.cluster.transaction();
        let key = grant_key(user, db, table);
        let op = transaction
            .read_if_exists(&handle, &key, LockMode::CommittedRead)
            .map_err(refused(GRANTS))?;
        transaction.execute(Commit::Yes).map_err(refused(GRANTS))?;
        Ok(transaction
            .get(op)
            .map(|row| Privileges(row.values()[4].as_u64().unwrap_or(0) as u32)))
    }

    /// Changes the privileges of `user` at `db`.`table` by `change`, in one
    /// transaction holding the row's lock (two GRANTs at once both count).
    fn change_grant(
        &self,
        user: &UserName,
        db: &str,
        table: &str,
        change: impl Fn(Privileges) -> Privileges,
    ) -> SqlResult<()> {
        let handle = self.table(GRANTS)?;
        let key = grant_key(user, db, table);
        let mut transaction = self.cluster.transaction();
        let op = transaction
            .read_if_exists(&handle, &key, LockMode::Exclusive)
            .map_err(refused(GRANTS))?;
        transaction.execute(Commit::No).map_err(refused(GRANTS))?;
        let held = transaction
            .get(op)
            .map(|row| Privileges(row.values()[4].as_u64().unwrap_or(0) as u32));
        let new = change(held.unwrap_or_default());
        match (held, new.is_empty()) {
            (None, true) => {}
            (Some(_), true) => transaction
                .delete(&handle, &key)
                .map(|_| ())
                .map_err(refused(GRANTS))?,
            (_, false) => {
                let row = [
                    ("user", key[0].clone()),
                    ("host", key[1].clone()),
                    ("db", key[2].clone()),
                    ("tbl", key[3].clone()),
                    ("privileges", client::Value::UInt(new.0 as u64)),
                ];
                transaction
                    .write(&handle, &row)
                    .map(|_| ())
                    .map_err(refused(GRANTS))?;
            }
        }
        transaction.execute(Commit::Yes).map_err(refused(GRANTS))?;
        Ok(())
    }
}

fn grant_key(user: &UserName, db: &str, table: &str) -> Vec<client::Value> {
    vec![
        client::Value::from(user.user.as_str()),
        client::Value::from(user.host.as_str()),
        client::Value::from(db),
        client::Value::from(table),
    ]
}

fn operation_failed(operation: &str, user: &UserName) -> SqlError {
    SqlError::new(
        1396,
        format!("Operation {operation} failed for {}", user.quoted()),
    )
}

fn check_user_name(user: &UserName) -> SqlResult<()> {
    if user.user.is_empty() || user.user.len() > MAX_USER as usize {
        return Err(SqlError::new(
            1470,
            format!(
                "String '{}' is too long for user name (should be 1 to {MAX_USER} characters)",
                user.user
            ),
        ));
    }
    if user.host.is_empty() || user.host.len() > MAX_HOST as usize {
        return Err(SqlError::new(
            1470,
            format!(
                "String '{}' is too long for host name (should be 1 to {MAX_HOST} characters)",
                user.host
            ),
        ));
    }
    Ok(())
}

/// One granted set of privileges: at every database (`*`), at a
/// database's every table (`db`, `*`), or at a table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    /// The database, or `*`.
    pub database: String,
    /// The table, or `*`.
    pub table: String,
    /// What is granted there.
    pub privileges: Privileges,
}

/// What an account was granted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Grants {
    /// The grants, in no order.
    pub entries: Vec<Grant>,
}

impl Grants {
    /// Everything held at `database`.`table` (`*` for every table): the
    /// global, database and table grants that cover it.
    pub fn at(&self, database: &str, table: &str) -> Privileges {
        self.entries
            .iter()
            .filter(|grant| {
                let database_covered = grant.database == "*" || grant.database == database;
                let table_covered = grant.table == "*" || grant.table == table;
                database_covered && table_covered
            })
            .fold(Privileges::default(), |all, grant| {
                all.union(grant.privileges)
            })
    }

    /// Whether `needed` is held at `database`.`table`.
    pub fn allows(&self, database: &str, table: &str, needed: Privileges) -> bool {
        self.at(database, table).contains(needed)
    }

    /// Whether anything is held in `database` (at it or at one of its
    /// tables): what USE and SHOW DATABASES need.
    pub fn any_in(&self, database: &str) -> bool {
        self.entries.iter().any(|grant| {
            (grant.database == "*" || grant.database == database)
                && !grant
                    .privileges
                    .without(Privileges::GRANT_OPTION)
                    .is_empty()
        })
    }

    /// SHOW GRANTS's lines for `account`.
    fn show(&self, account: &Account) -> Vec<String> {
        let who = format!("`{}`@`{}`", account.user, account.host);
        let mut lines = Vec::new();
        let global = self.at("*", "*");
        let option = |privileges: Privileges| match privileges.contains(Privileges::GRANT_OPTION) {
            true => " WITH GRANT OPTION",
            false => "",
        };
        let global_grant = self
            .entries
            .iter()
            .find(|g| g.database == "*")
            .map_or(Privileges::default(), |g| g.privileges);
        lines.push(format!(
            "GRANT {} ON *.* TO {who}{}",
            global.describe(true),
            option(global_grant)
        ));
        let mut rest: Vec<&Grant> = self.entries.iter().filter(|g| g.database != "*").collect();
        rest.sort_by(|a, b| (&a.database, &a.table).cmp(&(&b.database, &b.table)));
        for grant in rest {
            let on = match grant.table.as_str() {
                "*" => format!("`{}`.*", grant.database),
                table => format!("`{}`.`{table}`", grant.database),
            };
            lines.push(format!(
                "GRANT {} ON {on} TO {who}{}",
                grant.privileges.describe(false),
                option(grant.privileges)
            ));
        }
        lines
    }
}

/// A user named in an account statement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserName {
    /// The user.
    pub user: String,
    /// The host pattern (`%` when not given).
    pub host: String,
    /// CURRENT_USER: the session's own account.
    pub current: bool,
}

impl UserName {
    /// `'user'@'host'`, as messages name it.
    fn quoted(&self) -> String {
        format!("'{}'@'{}'", self.user, self.host)
    }

    /// The account named, CURRENT_USER being `current`.
    fn resolve(&self, current: &Account) -> UserName {
        match self.current {
            true => UserName {
                user: current.user.clone(),
                host: current.host.clone(),
                current: false,
            },
            false => self.clone(),
        }
    }
}

/// `IDENTIFIED [WITH plugin] [BY 'password']`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Identified {
    /// The plugin named.
    pub plugin: Option<Plugin>,
    /// The password given.
    pub password: Option<String>,
}

/// What GRANT and REVOKE act on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum On {
    /// `*.*`.
    Everything,
    /// `db.*`, or `*` (the current database's).
    Database(Option<String>),
    /// `db.t` or `t`.
    Table(Option<String>, String),
}

impl On {
    /// (database, table) as grants key them.
    fn resolve(&self, current: Option<&str>) -> SqlResult<(String, String)> {
        let database = |given: &Option<String>| {
            given
                .clone()
                .or_else(|| current.map(str::to_string))
                .ok_or_else(|| SqlError::new(codes::NO_DB, "No database selected"))
        };
        Ok(match self {
            On::Everything => ("*".into(), "*".into()),
            On::Database(given) => (database(given)?, "*".into()),
            On::Table(given, table) => (database(given)?, table.clone()),
        })
    }
}

/// An account statement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Statement {
    /// CREATE USER.
    CreateUser {
        /// IF NOT EXISTS.
        if_not_exists: bool,
        /// The users and how each is identified.
        users: Vec<(UserName, Identified)>,
    },
    /// DROP USER.
    DropUser {
        /// IF EXISTS.
        if_exists: bool,
        /// The users.
        users: Vec<UserName>,
    },
    /// ALTER USER ... IDENTIFIED.
    AlterUser {
        /// IF EXISTS.
        if_exists: bool,
        /// The user.
        user: UserName,
        /// The new identification.
        identified: Identified,
    },
    /// GRANT.
    Grant {
        /// What is granted.
        privileges: Privileges,
        /// Where.
        on: On,
        /// To whom.
        users: Vec<UserName>,
        /// WITH GRANT OPTION.
        grant_option: bool,
    },
    /// REVOKE.
    Revoke {
        /// What is taken back (GRANT OPTION included when named).
        privileges: Privileges,
        /// Where.
        on: On,
        /// From whom.
        users: Vec<UserName>,
    },
    /// SHOW GRANTS [FOR user].
    ShowGrants {
        /// The user (`None`: the session's).
        user: Option<UserName>,
    },
}

/// A token of an account statement.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Token {
    /// A word (unquoted).
    Word(String),
    /// A quoted string or name.
    Quoted(String),
    /// A punctuation character.
    Symbol(char),
}

/// The tokens of `text`, each with whether white space came before it.
fn tokenize(text: &str) -> SqlResult<Vec<(Token, bool)>> {
    let mut tokens = Vec::new();
    let mut chars = text.chars().peekable();
    let mut spaced = false;
    while let Some(c) = chars.next() {
        let token = match c {
            c if c.is_whitespace() => {
                spaced = true;
                continue;
            }
            '\'' | '"' | '`' => {
                let mut value = String::new();
                let mut closed = false;
                while let Some(next) = chars.next() {
                    if next == c {
                        // A doubled quote is one quote character.
                        if chars.peek() == Some(&c) {
                            chars.next();
                            value.push(c);
                            continue;
                        }
                        closed = true;
                        break;
                    }
                    if next == '\\' && c != '`' {
                        if let Some(escaped) = chars.next() {
                            value.push(escaped);
                        }
                        continue;
                    }
                    value.push(next);
                }
                if !closed {
                    return Err(SqlError::parse("unterminated quoted string"));
                }
                Token::Quoted(value)
            }
            c if c.is_alphanumeric() || c == '_' || c == '$' => {
                let mut word = String::from(c);
                while let Some(next) = chars.peek() {
                    if next.is_alphanumeric() || *next == '_' || *next == '$' {
                        word.push(*next);
                        chars.next();
                    } else {
                        break;
                    }
                }
                Token::Word(word)
            }
            c => Token::Symbol(c),
        };
        tokens.push((token, spaced));
        spaced = false;
    }
    if tokens.last().map(|(token, _)| token) == Some(&Token::Symbol(';')) {
        tokens.pop();
    }
    Ok(tokens)
}

/// A cursor over tokens.
struct Tokens {
    tokens: Vec<(Token, bool)>,
    at: usize,
}

impl Tokens {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at).map(|(token, _)| token)
    }

    /// Whether white space comes before the next token.
    fn spaced(&self) -> bool {
        self.tokens.get(self.at).is_some_and(|(_, spaced)| *spaced)
    }

    fn next(&mut self) -> Option<Token> {
        let token = self.peek().cloned();
        self.at += 1;
        token
    }

    /// Takes the word `word` if it is next.
    fn word(&mut self, word: &str) -> bool {
        match self.peek() {
            Some(Token::Word(w)) if w.eq_ignore_ascii_case(word) => {
                self.at += 1;
                true
            }
            _ => false,
        }
    }

    fn words(&mut self, words: &[&str]) -> bool {
        let start = self.at;
        for word in words {
            if !self.word(word) {
                self.at = start;
                return false;
            }
        }
        true
    }

    fn expect(&mut self, word: &str) -> SqlResult<()> {
        match self.word(word) {
            true => Ok(()),
            false => Err(self.error(&format!("expected {word}"))),
        }
    }

    fn symbol(&mut self, symbol: char) -> bool {
        match self.peek() {
            Some(Token::Symbol(s)) if *s == symbol => {
                self.at += 1;
                true
            }
            _ => false,
        }
    }

    fn error(&self, what: &str) -> SqlError {
        let near = match self.peek() {
            Some(Token::Word(w)) | Some(Token::Quoted(w)) => format!("near '{w}'"),
            Some(Token::Symbol(s)) => format!("near '{s}'"),
            None => "at the end".into(),
        };
        SqlError::parse(format!("{what} {near}"))
    }

    fn done(&self) -> SqlResult<()> {
        match self.peek() {
            None => Ok(()),
            Some(_) => Err(self.error("unexpected text")),
        }
    }

    /// A name: a word or a quoted string.
    fn name(&mut self) -> SqlResult<String> {
        match self.next() {
            Some(Token::Word(w)) | Some(Token::Quoted(w)) => Ok(w),
            _ => {
                self.at -= 1;
                Err(self.error("expected a name"))
            }
        }
    }

    /// `'user'@'host'`, `user@host`, `'user'` (host `%`), CURRENT_USER[()].
    fn user(&mut self) -> SqlResult<UserName> {
        if self.word("CURRENT_USER") {
            if self.symbol('(') && !self.symbol(')') {
                return Err(self.error("expected )"));
            }
            return Ok(UserName {
                user: String::new(),
                host: String::new(),
                current: true,
            });
        }
        let user = self.name()?;
        let host = match self.symbol('@') {
            true => self.host()?,
            false => "%".into(),
        };
        Ok(UserName {
            user,
            host,
            current: false,
        })
    }

    /// A host: quoted, or words, numbers and dots run together.
    fn host(&mut self) -> SqlResult<String> {
        if let Some(Token::Quoted(_)) = self.peek() {
            return self.name();
        }
        let mut host = String::new();
        loop {
            // A host ends at white space (`app@localhost WITH ...`).
            if !host.is_empty() && self.spaced() {
                break;
            }
            match self.peek() {
                Some(Token::Word(w)) => host.push_str(w),
                Some(Token::Symbol(c)) if matches!(c, '.' | '%' | '_' | '-' | ':') => host.push(*c),
                _ => break,
            }
            self.at += 1;
        }
        match host.is_empty() {
            true => Err(self.error("expected a host")),
            false => Ok(host),
        }
    }

    fn users(&mut self) -> SqlResult<Vec<UserName>> {
        let mut users = vec![self.user()?];
        while self.symbol(',') {
            users.push(self.user()?);
        }
        Ok(users)
    }

    fn identified(&mut self) -> SqlResult<Identified> {
        let mut identified = Identified::default();
        if !self.word("IDENTIFIED") {
            return Ok(identified);
        }
        if self.word("WITH") {
            let name = self.name()?;
            identified.plugin = Some(Plugin::named(&name).ok_or_else(|| {
                SqlError::new(
                    1524,
                    format!("Plugin '{name}' is not loaded (Tessera has mysql_native_password and caching_sha2_password)"),
                )
            })?);
        }
        if self.word("BY") {
            match self.next() {
                Some(Token::Quoted(password)) => identified.password = Some(password),
                _ => {
                    self.at -= 1;
                    return Err(self.error("expected a quoted password"));
                }
            }
        }
        Ok(identified)
    }

    /// A privilege list: `ALL [PRIVILEGES]` or names, comma-separated
    /// (`GRANT OPTION` among them for REVOKE).
    fn privileges(&mut self) -> SqlResult<Privileges> {
        if self.word("ALL") {
            self.word("PRIVILEGES");
            return Ok(Privileges::ALL_OBJECT);
        }
        let mut privileges = Privileges::default();
        loop {
            let privilege = if self.words(&["GRANT", "OPTION"]) {
                Privileges::GRANT_OPTION
            } else if self.words(&["CREATE", "USER"]) {
                Privileges::CREATE_USER
            } else if self.word("USAGE") {
                Privileges::default()
            } else {
                let word = self.name()?;
                Privileges::named(&word).ok_or_else(|| {
                    SqlError::new(
                        codes::PARSE,
                        format!("Illegal privilege '{word}' (Tessera grants SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, INDEX, ALTER, CREATE USER and GRANT OPTION)"),
                    )
                })?
            };
            privileges = privileges.union(privilege);
            if !self.symbol(',') {
                return Ok(privileges);
            }
        }
    }

    /// `*.*`, `*`, `db.*`, `db.t`, `t`.
    fn on(&mut self) -> SqlResult<On> {
        if self.symbol('*') {
            if self.symbol('.') {
                if !self.symbol('*') {
                    return Err(self.error("expected *"));
                }
                return Ok(On::Everything);
            }
            return Ok(On::Database(None));
        }
        let first = self.name()?;
        if !self.symbol('.') {
            return Ok(On::Table(None, first));
        }
        if self.symbol('*') {
            return Ok(On::Database(Some(first)));
        }
        Ok(On::Table(Some(first), self.name()?))
    }
}

/// The account statement `text` is, `None` when it is none (the other
/// parser reads it), or the error in it.
pub fn parse(text: &str) -> Option<SqlResult<Statement>> {
    let mut words = text.split_whitespace();
    let (first, second) = (words.next()?, words.next().unwrap_or(""));
    let is = |word: &str, expected: &str| word.eq_ignore_ascii_case(expected);
    let account_statement = is(first, "GRANT")
        || is(first, "REVOKE")
        || (is(second, "USER") && (is(first, "CREATE") || is(first, "DROP") || is(first, "ALTER")))
        || (is(first, "SHOW") && is(second, "GRANTS"));
    if !account_statement {
        return None;
    }
    Some(tokenize(text).and_then(|tokens| parse_tokens(Tokens { tokens, at: 0 })))
}

fn parse_tokens(mut tokens: Tokens) -> SqlResult<Statement> {
    let statement = if tokens.words(&["CREATE", "USER"]) {
        let if_not_exists = tokens.words(&["IF", "NOT", "EXISTS"]);
        let mut users = Vec::new();
        loop {
            let user = tokens.user()?;
            let identified = tokens.identified()?;
            users.push((user, identified));
            if !tokens.symbol(',') {
                break;
            }
        }
        Statement::CreateUser {
            if_not_exists,
            users,
        }
    } else if tokens.words(&["DROP", "USER"]) {
        let if_exists = tokens.words(&["IF", "EXISTS"]);
        Statement::DropUser {
            if_exists,
            users: tokens.users()?,
        }
    } else if tokens.words(&["ALTER", "USER"]) {
        let if_exists = tokens.words(&["IF", "EXISTS"]);
        let user = tokens.user()?;
        let identified = tokens.identified()?;
        if identified == Identified::default() {
            return Err(tokens.error("ALTER USER takes IDENTIFIED [WITH plugin] BY 'password'"));
        }
        Statement::AlterUser {
            if_exists,
            user,
            identified,
        }
    } else if tokens.words(&["SHOW", "GRANTS"]) {
        let user = match tokens.word("FOR") {
            true => Some(tokens.user()?),
            false => None,
        };
        Statement::ShowGrants { user }
    } else if tokens.word("GRANT") {
        let privileges = tokens.privileges()?;
        tokens.expect("ON")?;
        tokens.word("TABLE");
        let on = tokens.on()?;
        tokens.expect("TO")?;
        let users = tokens.users()?;
        let grant_option = tokens.words(&["WITH", "GRANT", "OPTION"]);
        Statement::Grant {
            privileges,
            on,
            users,
            grant_option,
        }
    } else if tokens.word("REVOKE") {
        let mut privileges = tokens.privileges()?;
        if privileges == Privileges::ALL_OBJECT {
            // REVOKE ALL takes GRANT OPTION too.
            privileges = privileges.union(Privileges::GRANT_OPTION);
            tokens.symbol(',');
            tokens.words(&["GRANT", "OPTION"]);
        }
        tokens.expect("ON")?;
        tokens.word("TABLE");
        let on = tokens.on()?;
        tokens.expect("FROM")?;
        Statement::Revoke {
            privileges,
            on,
            users: tokens.users()?,
        }
    } else {
        return Err(tokens.error("not an account statement"));
    };
    tokens.done()?;
    Ok(statement)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Statement {
        parse(text).expect("an account statement").expect("parses")
    }

    #[test]
    fn account_statements_parse() {
        assert_eq!(
            parsed("CREATE USER IF NOT EXISTS 'app'@'%' IDENTIFIED BY 'se''cret'"),
            Statement::CreateUser {
                if_not_exists: true,
                users: vec![(
                    UserName {
                        user: "app".into(),
                        host: "%".into(),
                        current: false
                    },
                    Identified {
                        plugin: None,
                        password: Some("se'cret".into())
                    }
                )]
            }
        );
        assert_eq!(
            parsed("GRANT SELECT, INSERT ON shop.* TO app@localhost WITH GRANT OPTION"),
            Statement::Grant {
                privileges: Privileges::SELECT.union(Privileges::INSERT),
                on: On::Database(Some("shop".into())),
                users: vec![UserName {
                    user: "app".into(),
                    host: "localhost".into(),
                    current: false
                }],
                grant_option: true
            }
        );
        assert!(matches!(
            parsed("REVOKE ALL PRIVILEGES, GRANT OPTION ON *.* FROM 'a'@'10.0.%'"),
            Statement::Revoke {
                on: On::Everything,
                ..
            }
        ));
        assert!(matches!(
            parsed("ALTER USER 'a' IDENTIFIED WITH mysql_native_password BY 'x'"),
            Statement::AlterUser {
                identified: Identified {
                    plugin: Some(Plugin::Native),
                    ..
                },
                ..
            }
        ));
        assert!(matches!(
            parsed("SHOW GRANTS FOR CURRENT_USER()"),
            Statement::ShowGrants {
                user: Some(UserName { current: true, .. })
            }
        ));
        assert!(parse("SELECT 1").is_none());
        assert_eq!(
            parse("GRANT FLY ON *.* TO a").unwrap().unwrap_err().code,
            1064
        );
        assert_eq!(
            parse("CREATE USER 'a' IDENTIFIED BY")
                .unwrap()
                .unwrap_err()
                .code,
            1064
        );
        assert_eq!(
            parse("DROP USER 'a' extra").unwrap().unwrap_err().code,
            1064
        );
        assert_eq!(
            parse("CREATE USER 'a' IDENTIFIED WITH sha256_password")
                .unwrap()
                .unwrap_err()
                .code,
            1524
        );
    }

    #[test]
    fn grants_cover_their_levels() {
        let grants = Grants {
            entries: vec![
                Grant {
                    database: "shop".into(),
                    table: "*".into(),
                    privileges: Privileges::SELECT,
                },
                Grant {
                    database: "shop".into(),
                    table: "orders".into(),
                    privileges: Privileges::INSERT,
                },
            ],
        };
        assert!(grants.allows("shop", "items", Privileges::SELECT));
        assert!(grants.allows(
            "shop",
            "orders",
            Privileges::SELECT.union(Privileges::INSERT)
        ));
        assert!(!grants.allows("shop", "items", Privileges::INSERT));
        assert!(!grants.allows("other", "items", Privileges::SELECT));
        assert!(grants.any_in("shop"));
        assert!(!grants.any_in("other"));
    }

    #[test]
    fn host_patterns_prefer_the_specific() {
        let mut hosts = vec!["%", "10.0.0.%", "localhost", "10.%"];
        hosts.sort_by_key(|h| specificity(h));
        assert_eq!(hosts, vec!["localhost", "10.0.0.%", "10.%", "%"]);
        let loopback: IpAddr = "127.0.0.1".parse().unwrap();
        assert!(host_names(loopback).contains(&"localhost".to_string()));
        let mapped: IpAddr = "::ffff:10.1.2.3".parse().unwrap();
        assert!(host_names(mapped).contains(&"10.1.2.3".to_string()));
    }
}
