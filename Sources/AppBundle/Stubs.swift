// TEMPORARY: signatures the bundle-reader work fills in. Replaced before any commit lands.
import Foundation

/// A property-list value with its type kept (Entitlements values are bool, string, array, dict...).
public indirect enum PlistValue: Sendable, Equatable {
    case bool(Bool)
    case integer(Int64)
    case real(Double)
    case string(String)
    case date(Date)
    case data(Data)
    case array([PlistValue])
    case dictionary([String: PlistValue])
}

public struct BundleIdentifier: Sendable, Hashable, CustomStringConvertible {
    public let rawValue: String
    public init(validating text: String) throws { rawValue = text }
    public var description: String { rawValue }
}

public struct BundleVersion: Sendable, Comparable, CustomStringConvertible {
    public let rawValue: String
    public init(validating text: String) throws { rawValue = text }
    public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }
    public var description: String { rawValue }
}

public struct Entitlements: Sendable, Equatable {
    public let values: [String: PlistValue]
    public init(values: [String: PlistValue]) { self.values = values }
    public init(plistData: Data) throws { values = [:] }
    public func plistData() throws -> Data { Data() }
}

public enum BundleWalker {
    public static func walk(_ path: String, limits: BundleLimits, visitor: inout some BundleVisitor) throws -> BundleTree { BundleTree() }
}

extension AppBundle {
    public static func open(at path: String, limits: BundleLimits = .init()) throws -> AppBundle {
        throw AppdError(.unsupported, "not yet")
    }
}
extension PlistValue: Encodable { public func encode(to encoder: Encoder) throws { var c = encoder.singleValueContainer(); try c.encode("stub") } }
extension BundleProblem {}
