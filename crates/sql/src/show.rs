//! SHOW and DESCRIBE: databases, tables, a table's columns and its
//! CREATE TABLE, as MySQL words their output, so the `mariadb` client and
//! tools read them.

use crate::catalog::{Catalog, SqlTable};
use crate::error::SqlResult;
use crate::result::Response;
use crate::value;
use crate::value::Value;

/// SHOW DATABASES.
pub fn databases(catalog: &Catalog, pattern: Option<&str>) -> SqlResult<Response> {
    let mut names = vec![crate::information_schema::NAME.to_string()];
    names.extend(catalog.databases()?);
    let rows = names
        .into_iter()
        .filter(|name| crate::variables::name_matches(name, pattern))
        .map(|name| vec![Value::from(name.as_str())])
        .collect();
    Ok(Response::text_rows(&["Database"], rows))
}

/// SHOW [FULL] TABLES.
pub fn tables(
    catalog: &Catalog,
    database: &str,
    full: bool,
    pattern: Option<&str>,
) -> SqlResult<Response> {
    catalog.require_database(database)?;
    let mut names: Vec<(String, &str)> = catalog
        .tables_of(database)?
        .into_iter()
        .map(|name| (name, "BASE TABLE"))
        .collect();
    if !crate::information_schema::is_it(database) {
        names.extend(
            catalog
                .views_of(Some(database))?
                .into_iter()
                .map(|view| (view.name, "VIEW")),
        );
    }
    names.retain(|(name, _)| crate::variables::name_matches(name, pattern));
    names.sort();
    let heading = format!("Tables_in_{database}");
    let rows = names
        .iter()
        .map(|(name, kind)| {
            let mut row = vec![Value::from(name.as_str())];
            if full {
                row.push(Value::from(*kind));
            }
            row
        })
        .collect();
    Ok(match full {
        true => Response::text_rows(&[&heading, "Table_type"], rows),
        false => Response::text_rows(&[&heading], rows),
    })
}

/// COLUMNS's and DESCRIBE's key: PRI, UNI, MUL or nothing.
pub(crate) fn key_of(table: &SqlTable, index: usize) -> &'static str {
    let id = index as u16;
    let def = table.def();
    if table.is_view() {
        // Its rows are its query's: no key of its own.
        ""
    } else if def.primary_key.contains(&id) && table.hidden_key().is_none() {
        "PRI"
    } else if def
        .indexes
        .iter()
        .any(|i| i.unique.is_some() && i.columns.len() == 1 && i.columns[0] == id)
    {
        "UNI"
    } else if def.indexes.iter().any(|i| i.columns.first() == Some(&id)) {
        "MUL"
    } else {
        ""
    }
}

/// DESCRIBE / SHOW COLUMNS.
pub fn columns(table: &SqlTable) -> Response {
    let rows = table
        .visible_columns()
        .map(|(index, column)| {
            vec![
                Value::from(column.name.as_str()),
                Value::from(column.sql_type.declared().as_str()),
                Value::from(if column.nullable { "YES" } else { "NO" }),
                Value::from(key_of(table, index)),
                match &column.default {
                    None | Some(Value::Null) => Value::Null,
                    Some(value) => Value::from(value::display(value).as_str()),
                },
                Value::from(match (&column.generated, column.auto_increment) {
                    (Some(generated), _) => crate::generated::extra(generated),
                    (None, true) => "auto_increment",
                    (None, false) => "",
                }),
            ]
        })
        .collect();
    Response::text_rows(&["Field", "Type", "Null", "Key", "Default", "Extra"], rows)
}

fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\\', "\\\\").replace('\'', "''"))
}

/// The CREATE TABLE statement that makes `table` again.
pub fn create_statement(table: &SqlTable) -> String {
    let def = table.def();
    let mut lines = Vec::new();
    for (_, column) in table.visible_columns() {
        let mut line = format!("  `{}` {}", column.name, column.sql_type.declared());
        if let Some(generated) = &column.generated {
            line.push_str(&crate::generated::clause(generated));
        }
        if !column.nullable {
            line.push_str(" NOT NULL");
        }
        if column.auto_increment {
            line.push_str(" AUTO_INCREMENT");
        }
        match &column.default {
            Some(Value::Null) => line.push_str(" DEFAULT NULL"),
            Some(value) => line.push_str(&format!(" DEFAULT {}", quote(&value::display(value)))),
            None if column.nullable && column.generated.is_none() => line.push_str(" DEFAULT NULL"),
            None => {}
        }
        lines.push(line);
    }
    let names = |columns: &[u16]| {
        columns
            .iter()
            .map(|c| format!("`{}`", table.columns[*c as usize].name))
            .collect::<Vec<_>>()
            .join(",")
    };
    // A hidden key is no PRIMARY KEY of the statement's: the table made
    // again from it gets one of its own.
    if table.hidden_key().is_none() {
        lines.push(format!("  PRIMARY KEY ({})", names(&def.primary_key)));
    }
    for index in &def.indexes {
        let kind = match index.unique {
            Some(_) => "UNIQUE KEY",
            None => "KEY",
        };
        lines.push(format!(
            "  {kind} `{}` ({})",
            index.name,
            names(&index.columns)
        ));
    }
    for check in &table.checks {
        let declaration = &check.declaration;
        lines.push(format!(
            "  CONSTRAINT `{}` CHECK ({}){}",
            declaration.name,
            declaration.clause,
            match declaration.enforced {
                true => "",
                false => " /*!80016 NOT ENFORCED */",
            }
        ));
    }
    let partitioning = match def.partition_key.is_empty() {
        true => String::new(),
        false => format!(
            "\n/*!50100 PARTITION BY KEY ({}) */",
            names(&def.partition_key)
        ),
    };
    format!(
        "CREATE TABLE `{}` (\n{}\n) ENGINE=ndbcluster DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin{partitioning}",
        table.name,
        lines.join(",\n")
    )
}

/// SHOW CREATE TABLE.
pub fn create_table(table: &SqlTable) -> Response {
    Response::text_rows(
        &["Table", "Create Table"],
        vec![vec![
            Value::from(table.name.as_str()),
            Value::from(create_statement(table).as_str()),
        ]],
    )
}
