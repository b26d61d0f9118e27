/// What `POST /v1/apps/{id}/restore` answers: the app, the backup it now holds, and what was
/// written (docs/api.md, "Backup and restore").
public struct APIRestoreResult: Codable, Sendable, Equatable {
    public var bundleId: String
    /// The version and signer of the app the backup was taken from, and when.
    public var backupVersion: String?
    public var backupCreatedAt: String
    public var backupSigner: String?
    public var files: Int
    public var bytes: Int64
    public var dataContainer: String
    /// The application groups whose containers were restored (`groups=1`).
    public var groups: [String]?
    /// The groups the backup holds that were left as they are (no `groups=1`).
    public var groupsNotRestored: [String]?

    public init(
        bundleId: String, backupVersion: String?, backupCreatedAt: String, backupSigner: String?,
        files: Int, bytes: Int64, dataContainer: String, groups: [String]? = nil,
        groupsNotRestored: [String]? = nil
    ) {
        self.groups = groups
        self.groupsNotRestored = groupsNotRestored
        self.bundleId = bundleId
        self.backupVersion = backupVersion
        self.backupCreatedAt = backupCreatedAt
        self.backupSigner = backupSigner
        self.files = files
        self.bytes = bytes
        self.dataContainer = dataContainer
    }
}
