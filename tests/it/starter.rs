//! `idem challenge --starter ruby`: the plain-Ruby challenge without a clone, written into the current folder through the safe writer, never over a file or through a link.

use std::os::unix::fs::symlink;

use crate::common::Sandbox;

const RUBY: &str = include_str!("../../examples/ruby/app.rb");

#[test]
fn the_ruby_starter_is_written_once_and_never_over_a_file() {
    let sandbox = Sandbox::new("starter");
    let starter_in = |dir: &std::path::Path| {
        sandbox
            .idem()
            .current_dir(dir)
            .args(["challenge", "--starter", "ruby"])
            .output()
            .unwrap()
    };
    let folder = sandbox.dir.join("mine");
    std::fs::create_dir(&folder).unwrap();
    let out = starter_in(&folder);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("idem db -- ruby app.rb"), "{said}");
    assert!(
        said.contains("idem challenge --url http://127.0.0.1:4567"),
        "{said}"
    );
    let app = folder.join("app.rb");
    assert_eq!(std::fs::read_to_string(&app).unwrap(), RUBY);
    if let Ok(checked) = std::process::Command::new("ruby")
        .arg("-c")
        .arg(&app)
        .output()
    {
        assert!(checked.status.success(), "valid Ruby: {checked:?}");
    }
    // Again: the learner's edits stay.
    std::fs::write(&app, "# my work\n").unwrap();
    let again = starter_in(&folder);
    assert_eq!(again.status.code(), Some(1));
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(err.contains("never writes over a file"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert_eq!(std::fs::read_to_string(&app).unwrap(), "# my work\n");
    // A link named app.rb, even a dangling one, is not followed.
    let other = sandbox.dir.join("elsewhere");
    std::fs::create_dir(&other).unwrap();
    symlink(sandbox.dir.join("target.rb"), other.join("app.rb")).unwrap();
    let linked = starter_in(&other);
    assert_eq!(linked.status.code(), Some(1));
    assert!(
        !sandbox.dir.join("target.rb").exists(),
        "the link's target was not written"
    );
}
