/// The one version of appd: every binary (`appd --version`, `appctl version`), the daemon's
/// `GET /v1/version`, and the Debian package (scripts/package reads this line) say this.
public enum AppdVersion {
    public static let current = "0.4.0"
}
